"""Which requests are captured, and what a capture keeps after redaction (pure parts)."""

from __future__ import annotations

import pytest

from services.common.models.generation import Completion, Sampling
from services.common.redaction import RegexRedactor
from services.policy.capture import CaptureHeaderError, CaptureTicket, build_capture, capture_ticket

KEYS = {"k-acme": "acme"}


def headers(**kw: str) -> dict[str, str]:
    base = {"authorization": "Bearer k-acme", "x-rla-episode": "conv-1", "x-rla-consent": "training"}
    base.update({k.replace("_", "-"): v for k, v in kw.items()})
    return {k: v for k, v in base.items() if v != ""}


def test_capture_decisions() -> None:
    ticket, state = capture_ticket(headers(x_rla_turn="t-3", x_rla_consent="training, tasks"), True, KEYS)
    assert state == "queued" and ticket == CaptureTicket("acme", "conv-1", "t-3", ticket.consent)
    assert ticket.consent.training and ticket.consent.task_generation
    assert capture_ticket(headers(), False, KEYS) == (None, "off")
    assert capture_ticket({"authorization": "Bearer k-acme"}, True, KEYS) == (None, "off")
    assert capture_ticket(headers(authorization="Bearer wrong"), True, KEYS) == (None, "rejected:unknown_tenant")
    assert capture_ticket(headers(x_rla_consent="tasks"), True, KEYS) == (None, "rejected:no_consent")
    with pytest.raises(CaptureHeaderError) as err:
        capture_ticket(headers(x_rla_episode="me@mail.com"), True, KEYS)
    assert err.value.param == "X-RLA-Episode"


def completion(text: str) -> Completion:
    return Completion(text, (1, 2, 3), (7, 8), (-0.1, -0.2), "stop")


def test_token_ids_are_kept_only_for_text_redaction_left_unchanged() -> None:
    ticket, _ = capture_ticket(headers(), True, KEYS)
    assert ticket is not None
    r = RegexRedactor()
    clean = build_capture(ticket, [{"role": "user", "content": "2+2?"}], completion("4"), "c-1", 3, Sampling(), r, 0.0)
    assert list(clean.prompt_token_ids) == [1, 2, 3] and list(clean.response_token_ids) == [7, 8]
    assert not clean.retokenize and clean.model_version == 3 and clean.completion_id == "c-1"
    pii = build_capture(ticket, [{"role": "user", "content": "I am a@b.io"}], completion("hi a@b.io"), "c-2", 3,
                        Sampling(), r, 0.0)
    assert pii.prompt[0].content == "I am <EMAIL_1>" and pii.response == "hi <EMAIL_1>"
    assert not pii.prompt_token_ids and not pii.response_token_ids and not pii.logprobs and pii.retokenize
    assert dict(pii.redactions) == {"EMAIL": 2}
    half = build_capture(ticket, [{"role": "user", "content": "I am a@b.io"}], completion("ok"), "c-3", 3,
                         Sampling(), r, 0.0)
    assert not half.prompt_token_ids and list(half.response_token_ids) == [7, 8] and half.retokenize
