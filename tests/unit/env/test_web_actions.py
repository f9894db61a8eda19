"""The web family's action parser: exactly `click <ref>` and `type <ref> "text"`, nothing else."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.common.errors import InvalidArgumentError
from services.env.families.web_actions import (MAX_TEXT_CHARS, ActionSyntaxError, WebAction, format_action,
                                               parse_action)


@pytest.mark.parametrize(("text", "expected"), [
    ("click 7", WebAction("click", 7)),
    ("  click 12\n", WebAction("click", 12)),
    ('type 3 "Kasey"', WebAction("type", 3, "Kasey")),
    ('type 3 ""', WebAction("type", 3, "")),
    ('type 4 "say \\"hi\\""', WebAction("type", 4, 'say "hi"')),
    ('type 4 "a\\\\b"', WebAction("type", 4, "a\\b")),
    ('type 5 "two words"', WebAction("type", 5, "two words")),
])
def test_the_two_forms_parse(text: str, expected: WebAction) -> None:
    assert parse_action(text) == expected


@pytest.mark.parametrize("text", [
    "", "click", "click 0", "click -1", "click 07", "click 1234567", "Click 7", "click  7", "click 7.",
    "click 7 please", "I click 7", "click [7]", "type 3 Kasey", "type 3 'Kasey'", 'type "Kasey"',
    'type 3 "Kasey', 'type 3 "Kasey" now', 'type 3 "a"b"', 'type 3 "a\\nb"', 'type x "a"', "\\boxed{1}",
])
def test_anything_else_is_refused_with_the_input_quoted(text: str) -> None:
    with pytest.raises(ActionSyntaxError) as info:
        parse_action(text)
    assert repr(text[:80]) in str(info.value)
    assert isinstance(info.value, InvalidArgumentError)


def test_text_longer_than_the_limit_is_refused() -> None:
    assert parse_action(f'type 1 "{"x" * MAX_TEXT_CHARS}"').text == "x" * MAX_TEXT_CHARS
    with pytest.raises(ActionSyntaxError, match=f"{MAX_TEXT_CHARS + 1} characters"):
        parse_action(f'type 1 "{"x" * (MAX_TEXT_CHARS + 1)}"')


@given(st.integers(1, 999_999), st.text(max_size=MAX_TEXT_CHARS))
def test_format_then_parse_is_the_identity(ref: int, text: str) -> None:
    for action in (WebAction("click", ref), WebAction("type", ref, text)):
        assert parse_action(format_action(action)) == action
