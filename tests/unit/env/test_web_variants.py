"""Model-rewritten web instructions (pure parts): the request, parsing, the template a rewrite becomes
and how each page fills it in (the expert's check in a real browser is in
tests/integration/env/test_web_family.py; through the env service in test_web_rewrites.py)."""

from __future__ import annotations

import json

import pytest

from rlanything.v1.events_pb2 import DIRECTION_EASIER, DIRECTION_HARDER
from services.env.text_variants import VariantError
from services.env.web_variants import (MAX_INSTRUCTION_CHARS, WebRewrite, fill_template, instruction_template,
                                       parse_web_variant, template_id, web_variant_messages)

LOGIN = 'Enter the username "kenda" and the password "vEX" into the text fields and press login.'


def test_the_model_is_shown_the_instruction_the_task_the_success_rate_and_the_direction():
    system, user = web_variant_messages(LOGIN, "login-user", DIRECTION_HARDER, 0.875, ["type 5 \"vEX\""])
    assert system["role"] == "system" and "JSON" in system["content"]
    text = user["content"]
    assert LOGIN in text and "login-user" in text and "88%" in text
    assert "HARDER" in text and '- type 5 "vEX"' in text and "keep every text in double quotes" in text
    easier = web_variant_messages(LOGIN, "login-user", DIRECTION_EASIER, 0.0)[1]["content"]
    assert "EASIER" in easier and "wrong actions" not in easier


def test_a_rewrite_parses_with_optional_distractors_and_a_fence():
    answer = json.dumps({"instruction": "  Log in   as \"kenda\" ", "distractors": 3})
    assert parse_web_variant(answer) == WebRewrite('Log in as "kenda"', 3)
    assert parse_web_variant(f"```json\n{json.dumps({'instruction': 'x'})}\n```") == WebRewrite("x", None)


@pytest.mark.parametrize(("answer", "reason"), [
    ("Sure: click it", "not JSON"),
    ("[1, 2]", "not an object"),
    (json.dumps({"text": "x"}), "no instruction text (keys: ['text'])"),
    (json.dumps({"instruction": "   "}), "no instruction text"),
    (json.dumps({"instruction": "x" * (MAX_INSTRUCTION_CHARS + 1)}), f"at most {MAX_INSTRUCTION_CHARS}"),
    (json.dumps({"instruction": "x", "distractors": 9}), "distractors=9 is not an integer in [0, 8]"),
    (json.dumps({"instruction": "x", "distractors": "2"}), "distractors='2'"),
    (json.dumps({"instruction": "x", "distractors": True}), "distractors=True"),
])
def test_a_malformed_rewrite_is_refused_with_the_reason(answer: str, reason: str):
    with pytest.raises(VariantError) as err:
        parse_web_variant(answer)
    assert reason in str(err.value)


def test_the_template_puts_placeholders_where_the_quoted_texts_were_and_each_page_fills_its_own():
    rewrite = 'Sign in {as} user "kenda" with secret "vEX", then press login.'
    template = instruction_template(LOGIN, rewrite)
    assert template == 'Sign in {{as}} user "{0}" with secret "{1}", then press login.'
    assert fill_template(template, ["kenda", "vEX"]) == rewrite
    assert fill_template(template, ["bob", "x{1}"]) == 'Sign in {as} user "bob" with secret "x{1}", then press login.'
    assert fill_template("Focus into the box.", []) == "Focus into the box."


@pytest.mark.parametrize(("rewrite", "reason"), [
    (LOGIN, "is its parent instruction again"),
    ('Enter  the username "kenda" and the password "vEX" into the text fields and press login. ', "parent instruction again"),
    ('Log in as "kenda" with password "abc".', "quoted texts ['kenda', 'abc'] are not the instruction's ['kenda', 'vEX']"),
    ('Use the password "vEX" for user "kenda".', "same texts, same order"),
    ('Log in as "kenda".', "are not the instruction's"),
    ('Log in as "kenda" with "vEX" and "more".', "are not the instruction's"),
])
def test_a_rewrite_that_changes_drops_or_adds_a_quoted_text_is_refused(rewrite: str, reason: str):
    with pytest.raises(VariantError) as err:
        instruction_template(LOGIN, rewrite)
    assert reason in str(err.value)


def test_a_template_that_needs_more_quoted_texts_than_the_page_has_is_refused():
    with pytest.raises(VariantError, match="needs 2 quoted texts, the page has 1"):
        fill_template('Type "{0}" then "{1}".', ["a"])


def test_template_ids_are_stable_nonzero_and_differ():
    a, b = template_id('Press "{0}".'), template_id('Push "{0}".')
    assert a == template_id('Press "{0}".') and a != b
    assert all(1 <= i < 2**31 for i in (a, b))
