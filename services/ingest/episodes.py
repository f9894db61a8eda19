"""Pure rules of live episodes: validation, redaction of a whole episode, upsert decisions, the
state machine (open → closed → settled) and feedback placement. No I/O: `shell.py` is the shell.

States (`EpisodeStatus.State`):
  * OPEN: turns may still be appended (a higher revision replaces the stored one);
  * CLOSED: the product said ``ended`` (or no revision came for ``idle_close_s``); feedback still
    counts until ``settle_deadline = closed_at + settle_window_s``;
  * SETTLED: final; published once for judging and training. Later feedback is LATE (kept, counted,
    never trained on); a later revision is SUPERSEDED.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from rlanything.v1.ingest_pb2 import EpisodeRecord, EpisodeStatus, Feedback, IngestAck, IngestEpisode

from services.common.redaction import Placeholders, Redactor, redact_texts
from services.common.text import EXTERNAL_ID

__all__ = ["IngestError", "validate_episode", "validate_feedback", "redact_episode", "redact_feedback", "redactions_added",
           "content_hash", "user_hash", "decide_upsert", "new_record", "place_feedback", "advance", "status_of",
           "ROLES"]

ROLES = ("system", "user", "assistant", "tool")
State = EpisodeStatus.State
Status = IngestAck.Status


@dataclass
class IngestError(Exception):
    """A refused request: HTTP ``status`` (4xx/5xx), a message naming the field, and ``param``."""

    status: int
    message: str
    param: str | None = None

    def __str__(self) -> str:
        return self.message


def _check_id(value: str, field: str) -> None:
    if not EXTERNAL_ID.fullmatch(value):
        raise IngestError(422, f"{field} must be 1-128 characters of [A-Za-z0-9._:-], got {value[:40]!r}", field)


def validate_episode(ep: IngestEpisode, max_messages: int, max_bytes: int) -> None:
    """Check a posted episode before anything is stored (pure).

    Raises:
        IngestError: 422 naming the bad field, or 413 when over ``max_messages`` or ``max_bytes``.
    """
    _check_id(ep.episode_id, "episode_id")
    if ep.revision < 0:
        raise IngestError(422, f"revision must be >= 0, got {ep.revision}", "revision")
    if not ep.messages:
        raise IngestError(422, "messages must hold at least one message", "messages")
    if len(ep.messages) > max_messages:
        raise IngestError(413, f"messages: {len(ep.messages)} messages, over ingest.max_messages={max_messages}",
                          "messages")
    size = ep.ByteSize()
    if size > max_bytes:
        raise IngestError(413, f"episode of {size} bytes is over ingest.max_episode_bytes={max_bytes}", "episode")
    for i, m in enumerate(ep.messages):
        if m.role not in ROLES:
            raise IngestError(422, f"messages[{i}].role must be one of {', '.join(ROLES)}, got {m.role!r}",
                              f"messages[{i}].role")
    if ep.outcome.value not in (-1, 0, 1):
        raise IngestError(422, f"outcome.value must be +1, -1 or 0 (none), got {ep.outcome.value}", "outcome.value")
    if ep.outcome.value and not ep.outcome.source:
        raise IngestError(422, "outcome.source must say who decided the outcome (USER, PRODUCT or REFERENCE_CHECK)",
                          "outcome.source")
    if ep.consent.retention_days < 0:
        raise IngestError(422, f"consent.retention_days must be >= 0, got {ep.consent.retention_days}",
                          "consent.retention_days")


def validate_feedback(fb: Feedback) -> None:
    """Check posted feedback (pure).

    Raises:
        IngestError: 422 naming the bad field.
    """
    _check_id(fb.feedback_id, "feedback_id")
    _check_id(fb.episode_id, "episode_id")
    kind = fb.kind
    if kind == Feedback.KIND_UNSPECIFIED:
        raise IngestError(422, "kind must be THUMBS, RATING, OUTCOME, CORRECTION or TEXT", "kind")
    if kind in (Feedback.KIND_THUMBS, Feedback.KIND_OUTCOME) and fb.value not in (-1.0, 1.0):
        raise IngestError(422, f"value must be +1 or -1 for {Feedback.Kind.Name(kind)}, got {fb.value:g}", "value")
    if kind == Feedback.KIND_RATING and not 1.0 <= fb.value <= 5.0:
        raise IngestError(422, f"value must be in [1, 5] for KIND_RATING, got {fb.value:g}", "value")
    if kind in (Feedback.KIND_CORRECTION, Feedback.KIND_TEXT) and not fb.text:
        raise IngestError(422, f"text is required for {Feedback.Kind.Name(kind)}", "text")


def redact_episode(ep: IngestEpisode, redactor: Redactor) -> IngestEpisode:
    """A copy of ``ep`` whose every free text (messages, outcome reference and detail, labels) is
    redacted with one set of placeholders, ``user_ref`` removed, ``redactions`` and
    ``content_hash`` set (pure).

    Raises:
        RedactionError: the redactor failed (the caller refuses the request).
    """
    out = IngestEpisode()
    out.CopyFrom(ep)
    out.ClearField("user_ref")
    labels = sorted(ep.labels)
    texts = [m.content for m in ep.messages] + [ep.outcome.reference, ep.outcome.detail] + [ep.labels[k] for k in labels]
    red = redact_texts(texts, redactor, Placeholders())
    n = len(ep.messages)
    for m, text in zip(out.messages, red.texts[:n]):
        m.content = text
    out.outcome.reference, out.outcome.detail = red.texts[n], red.texts[n + 1]
    for k, text in zip(labels, red.texts[n + 2:]):
        out.labels[k] = text
    out.redactions.clear()
    out.redactions.update(red.counts)
    out.content_hash = content_hash(out)
    return out


def redact_feedback(fb: Feedback, redactor: Redactor) -> tuple[Feedback, dict[str, int]]:
    """A copy of ``fb`` with its text redacted, and the findings replaced by kind (pure).

    Raises:
        RedactionError: the redactor failed.
    """
    out = Feedback()
    out.CopyFrom(fb)
    red = redact_texts([fb.text], redactor)
    out.text = red.texts[0]
    return out, red.counts


def redactions_added(previous: EpisodeRecord | None, ep: IngestEpisode) -> dict[str, int]:
    """Findings by kind that the redacted revision ``ep`` has beyond the stored one (pure): what
    the redaction metric adds, so a revision that repeats the conversation counts nothing twice."""
    before = previous.episode.redactions if previous is not None else {}
    added = {kind: n - before.get(kind, 0) for kind, n in ep.redactions.items()}
    return {kind: n for kind, n in added.items() if n > 0}


def content_hash(ep: IngestEpisode) -> str:
    """sha256 (hex) of what a revision says: its messages, outcome and ``ended``, not its metadata."""
    core = IngestEpisode(messages=ep.messages, outcome=ep.outcome, ended=ep.ended)
    return hashlib.sha256(core.SerializeToString(deterministic=True)).hexdigest()


def user_hash(secret: str, user_ref: str) -> str:
    """HMAC-SHA256 of ``user_ref`` under the tenant's secret ("" for no user): never stored raw."""
    if not user_ref:
        return ""
    return hmac.new(secret.encode(), user_ref.encode(), hashlib.sha256).hexdigest()


def decide_upsert(record: EpisodeRecord | None, ep: IngestEpisode) -> int:
    """What a posted (redacted) revision does to the stored record (pure).

    Returns:
        ``STATUS_ACCEPTED`` (new episode or higher revision), ``STATUS_DUPLICATE`` (same revision,
        same content), ``STATUS_SUPERSEDED`` (older revision, or the episode already settled).

    Raises:
        IngestError: 409 when the same revision arrives with different content.
    """
    if record is None:
        return Status.STATUS_ACCEPTED
    stored = record.episode
    if ep.revision == stored.revision:
        if ep.content_hash == stored.content_hash:
            return Status.STATUS_DUPLICATE
        raise IngestError(409, f"revision {ep.revision} of episode {ep.episode_id!r} was already posted with "
                               "different content; raise revision when the conversation changes", "revision")
    if ep.revision < stored.revision or record.state == State.STATE_SETTLED:
        return Status.STATUS_SUPERSEDED
    return Status.STATUS_ACCEPTED


def new_record(previous: EpisodeRecord | None, ep: IngestEpisode, now: float, settle_window_s: float,
               retention_days: int, user_hash_: str) -> EpisodeRecord:
    """The record after an accepted revision (pure): OPEN, or CLOSED with its settle deadline
    when ``ep.ended``; feedback, seen ids and stream sequences carried over."""
    record = EpisodeRecord()
    if previous is not None:
        record.CopyFrom(previous)
    record.episode.CopyFrom(ep)
    record.episode.received_unix_s = now
    record.user_hash = user_hash_ or record.user_hash
    days = ep.consent.retention_days or retention_days
    record.expires_unix_s = now + min(days, retention_days) * 86400.0
    if ep.ended:
        if record.state != State.STATE_CLOSED:
            record.settle_deadline_unix_s = now + settle_window_s
        record.state = State.STATE_CLOSED
    else:
        record.state = State.STATE_OPEN
        record.settle_deadline_unix_s = 0.0
    return record


def place_feedback(record: EpisodeRecord | None, fb: Feedback) -> tuple[int, EpisodeRecord | None]:
    """Where feedback goes (pure): ``(status, new record)``; the record is None when unchanged
    (BUFFERED: no episode yet; DUPLICATE: id seen before)."""
    if record is None:
        return Status.STATUS_BUFFERED, None
    if fb.feedback_id in record.feedback_ids:
        return Status.STATUS_DUPLICATE, None
    out = EpisodeRecord()
    out.CopyFrom(record)
    out.feedback_ids.append(fb.feedback_id)
    if record.state == State.STATE_SETTLED:
        out.late_feedback += 1
        return Status.STATUS_LATE, out
    out.feedback.append(fb)
    return Status.STATUS_APPLIED, out


def advance(record: EpisodeRecord, now: float, settle_window_s: float, idle_close_s: float) -> int | None:
    """The state ``record`` moves to at ``now`` (pure), or None when it stays: an OPEN episode
    idle for ``idle_close_s`` closes; a CLOSED one settles at its deadline."""
    if record.state == State.STATE_OPEN and now - record.episode.received_unix_s >= idle_close_s:
        return State.STATE_CLOSED
    if record.state == State.STATE_CLOSED and now >= record.settle_deadline_unix_s:
        return State.STATE_SETTLED
    return None


def status_of(record: EpisodeRecord) -> EpisodeStatus:
    """What `GetEpisode` shows: state and counts, no content (pure)."""
    return EpisodeStatus(episode_id=record.episode.episode_id, state=record.state, revision=record.episode.revision,
                         messages=len(record.episode.messages), feedback=len(record.feedback),
                         redactions=dict(record.episode.redactions),
                         settle_deadline_unix_s=record.settle_deadline_unix_s, late_feedback=record.late_feedback)
