"""Capture of live completions on the OpenAI endpoint: which requests are captured (pure), what a
capture holds after redaction (pure), and the bounded background queue that publishes it.

A product asks for capture per request with headers, and authenticates with its tenant key as the
OpenAI ``api_key`` (``Authorization: Bearer <key>``):

| header | meaning |
|---|---|
| ``X-RLA-Episode`` | the product's conversation id (required for capture; ``[A-Za-z0-9._:-]{1,128}``) |
| ``X-RLA-Turn`` | the product's id of this turn (optional) |
| ``X-RLA-Consent`` | comma-separated: ``training`` (required for capture), ``tasks`` (failures may become tasks) |

The response says what happened in ``X-RLA-Capture``: ``queued``, ``off`` (no episode header, or
capture disabled), or ``rejected:<reason>`` (``unknown_tenant``, ``no_consent``, ``queue_full``, ``top_p``:
a request sampled with ``top_p`` < 1 is answered but not captured, since the log-probs a capture
carries for training are those of the untruncated distribution, not of the one it was sampled from).
Capture never delays or fails the answer: the redaction and the publish run in a background task
behind a bounded queue; a full queue drops the capture and counts it. A malformed
``X-RLA-Episode`` is the one capture error the caller sees (400): a conversation is never
silently filed under a wrong id.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import Counter
from rlanything.v1.ingest_pb2 import CapturedCompletion, Consent, IngestMessage

from services.common.bus import EventBus
from services.common.kv import escape_id
from services.common.models.generation import Completion, Sampling
from services.common.redaction import Placeholders, RedactionError, Redactor, redact_texts
from services.common.streams import Subjects
from services.common.text import EXTERNAL_ID

__all__ = ["CaptureHeaderError", "CaptureTicket", "capture_ticket", "build_capture", "Capturer", "CAPTURES"]

log = logging.getLogger("rlanything.policy.capture")
CAPTURES = Counter("rla_policy_captures_total", "Completion captures, by status (queued, published, "
                   "dropped_queue_full, failed_redaction, failed_publish, rejected_unknown_tenant, "
                   "rejected_no_consent).", ["status"])


class CaptureHeaderError(ValueError):
    """A capture header is malformed (HTTP 400); ``param`` names the header."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class CaptureTicket:
    """A request that is to be captured."""

    tenant: str
    episode_id: str
    turn_id: str
    consent: Consent


def capture_ticket(headers: Mapping[str, str], enabled: bool, keys: Mapping[str, str]) -> tuple[CaptureTicket | None, str]:
    """Whether a request is captured (pure): ``(ticket or None, X-RLA-Capture value)``.

    Args:
        headers: the request headers, lower-case names.
        enabled: ``policy.capture.enabled``.
        keys: tenant key → tenant name.

    Raises:
        CaptureHeaderError: ``X-RLA-Episode`` or ``X-RLA-Turn`` is malformed.
    """
    episode = headers.get("x-rla-episode")
    if episode is None or not enabled:
        return None, "off"
    if not EXTERNAL_ID.fullmatch(episode):
        raise CaptureHeaderError(f"X-RLA-Episode must be 1-128 characters of [A-Za-z0-9._:-], got {episode[:40]!r}",
                                 "X-RLA-Episode")
    turn = headers.get("x-rla-turn", "")
    if turn and not EXTERNAL_ID.fullmatch(turn):
        raise CaptureHeaderError(f"X-RLA-Turn must be 1-128 characters of [A-Za-z0-9._:-], got {turn[:40]!r}",
                                 "X-RLA-Turn")
    scheme, _, key = headers.get("authorization", "").partition(" ")
    tenant = keys.get(key.strip()) if scheme.lower() == "bearer" else None
    if tenant is None:
        return None, "rejected:unknown_tenant"
    consent = {c.strip().lower() for c in headers.get("x-rla-consent", "").split(",") if c.strip()}
    if "training" not in consent:
        return None, "rejected:no_consent"
    return CaptureTicket(tenant, episode, turn, Consent(training=True, task_generation="tasks" in consent)), "queued"


def build_capture(ticket: CaptureTicket, chat: Sequence[Mapping[str, str]], completion: Completion,
                  completion_id: str, model_version: int, sampling: Sampling, redactor: Redactor,
                  now: float) -> CapturedCompletion:
    """The redacted capture of one served completion (pure). Token ids are kept only for text
    that redaction left unchanged (ids decode back to the text); otherwise ``retokenize`` is set.

    Raises:
        RedactionError: the redactor failed (the capture is dropped, never published raw).
    """
    texts = [m.get("content", "") for m in chat] + [completion.text]
    red = redact_texts(texts, redactor, Placeholders())
    prompt_same = red.texts[:-1] == texts[:-1]
    response_same = red.texts[-1] == texts[-1]
    return CapturedCompletion(
        tenant=ticket.tenant, episode_id=ticket.episode_id, turn_id=ticket.turn_id, completion_id=completion_id,
        prompt=[IngestMessage(role=m.get("role", ""), content=t) for m, t in zip(chat, red.texts[:-1])],
        response=red.texts[-1],
        prompt_token_ids=completion.prompt_token_ids if prompt_same else (),
        response_token_ids=completion.token_ids if response_same else (),
        logprobs=completion.logprobs if response_same else (),
        model_version=model_version, temperature=sampling.temperature, top_p=sampling.top_p,
        retokenize=not (prompt_same and response_same), consent=ticket.consent, created_unix_s=now,
        redactions=red.counts)


@dataclass
class _Item:
    ticket: CaptureTicket
    chat: list[dict[str, str]]
    completion: Completion
    completion_id: str
    model_version: int
    sampling: Sampling


class Capturer:
    """Bounded queue of captures and the task that redacts and publishes them."""

    def __init__(self, redactor: Redactor, queue_size: int) -> None:
        self.redactor = redactor
        self.queue: asyncio.Queue[_Item] = asyncio.Queue(queue_size)

    def offer(self, ticket: CaptureTicket, chat: list[dict[str, str]], completion: Completion, completion_id: str,
              model_version: int, sampling: Sampling) -> str:
        """Queue a capture without waiting; returns the X-RLA-Capture value (``queued`` or
        ``rejected:queue_full``)."""
        try:
            self.queue.put_nowait(_Item(ticket, chat, completion, completion_id, model_version, sampling))
        except asyncio.QueueFull:
            CAPTURES.labels("dropped_queue_full").inc()
            return "rejected:queue_full"
        CAPTURES.labels("queued").inc()
        return "queued"

    async def run(self, bus: EventBus) -> None:
        """Redact and publish queued captures until cancelled; a failure drops that capture only."""
        while True:
            item = await self.queue.get()
            try:
                capture = build_capture(item.ticket, item.chat, item.completion, item.completion_id,
                                        item.model_version, item.sampling, self.redactor, time.time())
            except RedactionError:
                CAPTURES.labels("failed_redaction").inc()
                continue
            try:
                await bus.publish(f"{Subjects.INGEST_COMPLETION}.{item.ticket.tenant}.{escape_id(item.ticket.episode_id)}",
                                  capture,
                                  msg_id=f"{item.ticket.tenant}/cmpl/{escape_id(item.completion_id)}")
            except Exception as exc:  # noqa: BLE001 - NATS down or refusing: the answer was already sent
                CAPTURES.labels("failed_publish").inc()
                log.warning("capture not published", extra={"tenant": item.ticket.tenant,
                                                            "error": type(exc).__name__})
                continue
            CAPTURES.labels("published").inc()
