"""Model-written variants (pure parts): what the model is shown, which answers parse, which variants
may become candidates — each refusal with a reason that names what is wrong."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlanything.v1.events_pb2 import DIRECTION_EASIER, DIRECTION_HARDER
from services.env.text_variants import (MAX_REFERENCE_CHARS, TextTask, VariantError, check_variant, parse_variant,
                                        variant_messages)

PARENT = TextTask("What is 17+25?", "42", "add the tens first")


def test_the_model_is_shown_the_task_the_direction_the_acc_and_the_bad_answers() -> None:
    system, user = variant_messages(PARENT, DIRECTION_HARDER, 0.875, ["\\boxed{41}", "x" * 500], answer_chars=50)
    assert system["role"] == "system" and "JSON" in system["content"]
    text = user["content"]
    assert "What is 17+25?" in text and "[reference answer]\n42" in text and "add the tens first" in text
    assert "88%" in text and "HARDER" in text and "\\boxed{41}" in text and "x" * 51 not in text
    easier = variant_messages(TextTask("q", "1"), DIRECTION_EASIER, 0.0)[1]["content"]
    assert "EASIER" in easier and "[hint]" not in easier and "wrong answers" not in easier


@pytest.mark.parametrize(("text", "reason"), [
    ("Here you go: 17*25", "not JSON"),
    ("[1, 2]", "not an object: list"),
    (json.dumps({"prompt": "q"}), "has no 'reference'"),
    (json.dumps({"prompt": "q", "reference": 7}), "'reference' is a int"),
    (json.dumps({"prompt": "  ", "reference": "7"}), "'prompt' is empty"),
    (json.dumps({"prompt": "q", "reference": "7" * (MAX_REFERENCE_CHARS + 1)}), "at most 200"),
])
def test_broken_answers_are_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(VariantError, match=reason):
        parse_variant(text)


def test_a_fenced_json_object_parses() -> None:
    got = parse_variant('```json\n{"prompt": " What is 2+3? ", "reference": "5", "hint": ""}\n```')
    assert got == TextTask("What is 2+3?", "5", "")


def test_the_parent_again_and_an_unsolvable_reference_are_refused() -> None:
    with pytest.raises(VariantError, match="its parent task again"):
        check_variant(PARENT, TextTask("What is  17+25?", "42"))
    with pytest.raises(VariantError, match="unsolvable: the reference '...'"):
        check_variant(PARENT, TextTask("What is 17*25?", "..."))
    check_variant(PARENT, TextTask("What is 17*25?", "425"))


@given(st.text(max_size=300))
def test_any_text_either_parses_or_is_refused_with_a_variant_error(text: str) -> None:
    try:
        task = parse_variant(text)
    except VariantError:
        return
    assert task.prompt and task.reference
