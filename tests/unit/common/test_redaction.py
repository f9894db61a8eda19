"""The built-in redactor: what it finds, what it leaves, and that canaries never survive."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.common.redaction import (Finding, Placeholders, RedactionError, RegexRedactor, iban_valid,
                                       luhn_valid, redact_texts)

R = RegexRedactor()


def redact(text: str) -> str:
    return redact_texts([text], R).texts[0]


@pytest.mark.parametrize(("text", "expected"), [
    ("mail me at jane.doe+shop@example.co.uk today", "mail me at <EMAIL_1> today"),
    ("card 4111 1111 1111 1111 exp 12/29", "card <CARD_1> exp 12/29"),
    ("card 4111-1111-1111-1111", "card <CARD_1>"),
    ("call +1 415 555 0132 or (415) 555-0199", "call <PHONE_1> or <PHONE_2>"),
    ("from 192.168.10.7 and 2001:db8::8a2e:370:7334", "from <IP_1> and <IP_2>"),
    ("IBAN DE89 3704 0044 0532 0130 00 please", "IBAN <IBAN_1> please"),
    ("Authorization: Bearer abcdefghijklmnop1234", "Authorization: <SECRET_1>"),
    ("key sk-proj-ABCDEFGHIJKLMNOPqrst and ghp_0123456789abcdefghijABCD", "key <SECRET_1> and <SECRET_2>"),
    ("https://bob:hunter2@host/x?token=abc123&page=2", "https://<URL_SECRET_1>@host/x?token=<URL_SECRET_2>&page=2"),
])
def test_each_kind_is_found_and_replaced(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize("text", [
    "What is 345 + 678? The answer is \\boxed{1023}.",
    "4111 1111 1111 1112 fails the Luhn check",
    "version 1.2.3 and 999.1.1.1 are not addresses",
    "the year 2026, 12 apples, step 3 of 12",
    "DE00 1234 5678 9012 3456 78 fails mod-97",
])
def test_ordinary_text_and_failed_checksums_are_left_alone(text: str) -> None:
    assert redact(text) == text


def test_the_same_value_keeps_its_placeholder_across_one_episodes_texts() -> None:
    places = Placeholders()
    out = redact_texts(["I am a@x.io", "no, b@y.io", "sorry, a@x.io"], R, places)
    assert out.texts == ["I am <EMAIL_1>", "no, <EMAIL_2>", "sorry, <EMAIL_1>"]
    assert out.counts == {"EMAIL": 3}
    assert redact_texts(["b@y.io"], R).texts == ["<EMAIL_1>"]  # a new episode numbers afresh


def test_custom_patterns_and_deny_terms() -> None:
    custom = RegexRedactor(patterns={"order": r"\bORD-\d{6}\b"}, deny=["Acme Corp"])
    assert redact_texts(["ORD-123456 for ACME corp"], custom).texts == ["<ORDER_1> for <DENY_1>"]
    with pytest.raises(ValueError, match="'bad'"):
        RegexRedactor(patterns={"bad": "("})


def test_checksums() -> None:
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert iban_valid("GB82 WEST 1234 5698 7654 32") and not iban_valid("GB82 WEST 1234 5698 7654 33")


def test_a_failing_redactor_fails_closed() -> None:
    class Broken:
        def find(self, text: str) -> list[Finding]:
            raise RedactionError("backend down")

    class Wrong:
        def find(self, text: str) -> list[Finding]:
            return [Finding("X", 0, len(text) + 5)]

    with pytest.raises(RedactionError, match="backend down"):
        redact_texts(["a@b.io"], Broken())
    with pytest.raises(RedactionError, match="out-of-range"):
        redact_texts(["a@b.io"], Wrong())


def _luhn_complete(prefix: str) -> str:
    for d in "0123456789":
        if luhn_valid(prefix + d):
            return prefix + d
    raise AssertionError


filler = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
emails = st.from_regex(r"[a-z]{1,8}\.[a-z]{1,8}@[a-z]{2,8}\.(com|org|io)", fullmatch=True)
cards = st.from_regex(r"4[0-9]{14}", fullmatch=True).map(_luhn_complete)
phones = st.from_regex(r"\+1 [2-9][0-9]{2} [2-9][0-9]{2} [0-9]{4}", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(before=filler, after=filler, email=emails, card=cards, phone=phones)
def test_canaries_never_survive_in_any_surrounding_text(before: str, after: str, email: str, card: str,
                                                        phone: str) -> None:
    text = f"{before} {email} {after} {card} {before}\n{phone} {after}"
    out = redact(text)
    assert email not in out and card not in out and phone not in out
    assert card.replace(" ", "") not in out.replace(" ", "")
