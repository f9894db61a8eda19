"""The built-in redactor: what it finds, what it leaves, and that canaries never survive."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from services.common.config import load_config
from services.common.errors import ConfigError
from services.common.redaction import (Finding, Placeholders, RedactionError, RegexRedactor, iban_valid,
                                       luhn_valid, redact_texts)
from services.common.redaction_normal import normal_view

R = RegexRedactor()
REGIONS = ["US", "GB", "FR", "DE"]
R4 = RegexRedactor(phone_regions=REGIONS)
CORPUS = yaml.safe_load((Path(__file__).parents[2] / "data" / "redaction_corpus.yaml").read_text(encoding="utf-8"))
PLACEHOLDER = re.compile(r"<[A-Z_]+_[0-9]+>")


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


# ---- the corpus (tests/data/redaction_corpus.yaml) --------------------------------------------

def _positive_text(case: dict) -> str:
    return case["text"].replace("{}", case["value"])


def _leaked(case: dict, out: str) -> list[str]:
    return [frag for frag in [case["value"], *case.get("leaks", [])] if frag in out]


@pytest.mark.parametrize("case", CORPUS["positives"], ids=lambda c: f"{c['kind']}:{c['value']!a}:{c['text']!a}")
def test_each_corpus_value_is_replaced_whole_and_the_rest_is_byte_identical(case: dict) -> None:
    out = redact_texts([_positive_text(case)], R4)
    assert out.texts == [case["text"].replace("{}", f"<{case['kind']}_1>")]
    assert out.counts == {case["kind"]: 1}
    assert not _leaked(case, out.texts[0])


@pytest.mark.parametrize("text", CORPUS["controls"], ids=ascii)
def test_each_corpus_control_keeps_its_exact_text(text: str) -> None:
    out = redact_texts([text], R4)
    assert out.texts == [text] and out.counts == {}


def test_the_corpus_has_zero_leaks_and_zero_false_placeholders() -> None:
    leaks = [(c["kind"], c["value"]) for c in CORPUS["positives"]
             if _leaked(c, redact_texts([_positive_text(c)], R4).texts[0])]
    false = [t for t in CORPUS["controls"] if PLACEHOLDER.search(redact_texts([t], R4).texts[0])]
    kinds = {c["kind"] for c in CORPUS["positives"]}
    assert len(CORPUS["positives"]) >= 60 and len(CORPUS["controls"]) >= 30 and len(kinds) == 7
    assert (leaks, false) == ([], [])


# ---- cards ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("ts 1748503543012 then 1548138160707", "ts 1748503543012 then 1548138160707"),  # Luhn-valid, no issuer
    ("4111111111111111", "<CARD_1>"),
    ("x4111111111111111y", "x<CARD_1>y"),
    ("41111111111111111", "41111111111111111"),      # Visa at 17 digits: no issuer uses it
    ("378282246310005", "<CARD_1>"),                   # Amex at 15
    ("3782822463100050", "3782822463100050"),          # 16 digits starting 37: not an Amex length
    ("5555555555554444 12", "<CARD_1> 12"),
    ("order 99 4111 1111 1111 1111 99", "order 99 <CARD_1> 99"),
    ("94111111111111111", "94111111111111111"),        # a digit before it, no separator: one longer run
])
def test_a_card_needs_an_issuer_a_length_it_uses_and_luhn(text: str, expected: str) -> None:
    assert redact_texts([text], R).texts == [expected]


def test_five_cards_among_timestamps_count_five() -> None:
    cards = ["4111 1111 1111 1111", "5555 5555 5555 4444", "3782 822463 10005", "6011 1111 1111 1117",
             "3530 1113 3330 0000"]
    text = " ".join(f"at 1748503543012 card {c}" for c in cards) + " 1548138160707 1748503543012"
    out = redact_texts([text], R)
    assert out.counts == {"CARD": 5}
    assert "1748503543012" in out.texts[0] and "1548138160707" in out.texts[0]


# ---- phones -----------------------------------------------------------------------------------

def test_national_phone_forms_follow_the_configured_regions() -> None:
    uk, fr = "call 020 7946 0958", "appelle 06 12 34 56 78"
    assert redact_texts([uk, fr], R).texts == [uk, fr]   # default regions: US only
    assert redact_texts([uk, fr], R4).texts == ["call <PHONE_1>", "appelle <PHONE_2>"]
    # international forms are found whatever the regions
    assert redact_texts(["+44 20 7946 0958 or +33 6 12 34 56 78"], R).texts == ["<PHONE_1> or <PHONE_2>"]


@pytest.mark.parametrize("regions", [["XX"], ["uk"], ["USA"], ["001"], [""]])
def test_an_unknown_phone_region_is_refused_naming_it(regions: list[str]) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(regions[0]))):
        RegexRedactor(phone_regions=regions)


def test_phone_regions_are_checked_at_config_load() -> None:
    cfg = load_config(None, ["ingest.redaction.phone_regions=[gb, FR]"])
    assert cfg.ingest.redaction.phone_regions == ["GB", "FR"]
    assert load_config(None).ingest.redaction.phone_regions == ["US"]
    with pytest.raises(ConfigError, match=r"ingest\.redaction\.phone_regions.*'ZZ'"):
        load_config(None, ["ingest.redaction.phone_regions=[GB, ZZ]"])


# ---- IPv6 and encoded forms -------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("A099::09C0:876A:130B", "<IP_1>"),
    ("::ffff:192.0.2.128", "<IP_1>"),
    ("[2001:db8::1]:443", "[<IP_1>]:443"),
    ("2001:db8::1.", "<IP_1>."),
    ("std::vector a::b :: 12:30:45", "std::vector a::b :: 12:30:45"),
])
def test_an_ipv6_address_is_one_placeholder(text: str, expected: str) -> None:
    assert redact_texts([text], R).texts == [expected]


def test_encoded_forms_of_one_address_share_its_placeholder() -> None:
    out = redact_texts(["a jane@x.io", "b jane%40x.io", "c jane%2540x.io", "d jane\uff20x.io", "e ja\u200bne@x.io"], R)
    assert out.texts == ["a <EMAIL_1>", "b <EMAIL_1>", "c <EMAIL_1>", "d <EMAIL_1>", "e <EMAIL_1>"]
    assert out.counts == {"EMAIL": 5}


def test_normalising_leaves_text_without_findings_byte_identical() -> None:
    text = "caf\u00e9 \uff21 100%25 \u200b%41 \u00bd"
    assert redact_texts([text], R).texts == [text]


def test_the_normalised_view_maps_each_character_back_to_its_origin() -> None:
    text = "a\u200bb %2540 \uff20 ok"
    view = normal_view(text)
    assert view is not None and view.text == "ab @ @ ok"
    at = view.text.index("@")
    assert text[slice(*view.original_span(at, at + 1))] == "%2540"
    assert text[slice(*view.original_span(0, 2))] == "a\u200bb"
    assert normal_view("plain ascii, 100% sure") is None and normal_view("caf\u00e9") is None


def test_a_long_list_of_numbers_is_redacted_in_linear_time() -> None:
    import time

    numbers = " ".join(str(i * 7919) for i in range(2000))  # 16 KB; the Luhn-only search took 80 s here
    start = time.perf_counter()
    assert redact_texts([numbers], R4).texts == [numbers]
    assert time.perf_counter() - start < 5.0
