"""Pure rules of live episodes (services/ingest/episodes.py)."""

from __future__ import annotations

import pytest

from rlanything.v1.ingest_pb2 import (Consent, EpisodeRecord, EpisodeStatus, Feedback, IngestAck, IngestEpisode,
                                      IngestMessage, Outcome, OUTCOME_SOURCE_USER)
from services.common.redaction import RegexRedactor
from services.ingest.episodes import (IngestError, advance, decide_upsert, new_record, place_feedback,
                                      redact_episode, redact_feedback, redactions_added, status_of, user_hash,
                                      validate_episode, validate_feedback)

S, ST = IngestAck.Status, EpisodeStatus.State
R = RegexRedactor()


def episode(revision: int = 0, text: str = "what is 2+2?", ended: bool = False, **kw) -> IngestEpisode:
    return IngestEpisode(tenant="acme", episode_id="ep-1", revision=revision, ended=ended,
                         consent=Consent(training=True),
                         messages=[IngestMessage(role="user", content=text),
                                   IngestMessage(role="assistant", content="\\boxed{4}")], **kw)


@pytest.mark.parametrize(("change", "status", "param"), [
    ({"episode_id": "a@b.com"}, 422, "episode_id"),
    ({"revision": -1}, 422, "revision"),
    ({"messages": []}, 422, "messages"),
    ({"messages": [IngestMessage(role="robot", content="x")]}, 422, "messages[0].role"),
    ({"messages": [IngestMessage(role="user", content="x")] * 5}, 413, "messages"),
    ({"messages": [IngestMessage(role="user", content="x" * 5000)]}, 413, "episode"),
    ({"outcome": Outcome(value=2)}, 422, "outcome.value"),
    ({"outcome": Outcome(value=1)}, 422, "outcome.source"),
])
def test_a_bad_episode_is_refused_naming_its_field(change: dict, status: int, param: str) -> None:
    ep = episode()
    for key, value in change.items():
        if key == "messages":
            del ep.messages[:]
            ep.messages.extend(value)
        elif key == "outcome":
            ep.outcome.CopyFrom(value)
        else:
            setattr(ep, key, value)
    with pytest.raises(IngestError) as err:
        validate_episode(ep, max_messages=4, max_bytes=4096)
    assert (err.value.status, err.value.param) == (status, param)
    assert param.split("[")[0].split(".")[0] in err.value.message


def test_feedback_rules() -> None:
    validate_feedback(Feedback(feedback_id="f1", episode_id="ep-1", kind=Feedback.KIND_THUMBS, value=-1))
    for fb, param in [(Feedback(feedback_id="f1", episode_id="ep-1"), "kind"),
                      (Feedback(feedback_id="f1", episode_id="ep-1", kind=Feedback.KIND_THUMBS, value=0.5), "value"),
                      (Feedback(feedback_id="f1", episode_id="ep-1", kind=Feedback.KIND_RATING, value=6), "value"),
                      (Feedback(feedback_id="f1", episode_id="ep-1", kind=Feedback.KIND_CORRECTION), "text"),
                      (Feedback(feedback_id="", episode_id="ep-1", kind=Feedback.KIND_TEXT, text="x"), "feedback_id")]:
        with pytest.raises(IngestError) as err:
            validate_feedback(fb)
        assert err.value.param == param


def test_redaction_covers_every_text_field_and_drops_the_user_ref() -> None:
    ep = episode(text="I am jane@x.io, card 4111 1111 1111 1111", user_ref="user-77",
                 outcome=Outcome(value=-1, source=OUTCOME_SOURCE_USER, reference="mail jane@x.io", detail="+1 415 555 0132"))
    ep.labels["note"] = "from jane@x.io"
    red = redact_episode(ep, R)
    dump = red.SerializeToString()
    assert b"jane@x.io" not in dump and b"4111" not in dump and b"555" not in dump and b"user-77" not in dump
    assert red.messages[0].content == "I am <EMAIL_1>, card <CARD_1>"
    assert red.outcome.reference == "mail <EMAIL_1>" and red.labels["note"] == "from <EMAIL_1>"
    assert dict(red.redactions) == {"EMAIL": 3, "CARD": 1, "PHONE": 1}
    assert red.content_hash and red.content_hash == redact_episode(ep, R).content_hash
    fb, counts = redact_feedback(Feedback(feedback_id="f", episode_id="ep-1", kind=Feedback.KIND_TEXT,
                                          text="jane@x.io or jane%40x.io"), R)
    assert fb.text == "<EMAIL_1> or <EMAIL_1>" and counts == {"EMAIL": 2}


def test_the_metric_counts_what_a_revision_adds_not_what_it_repeats() -> None:
    cards = "4111 1111 1111 1111, 5555 5555 5555 4444, 378282246310005, 6011111111111117, 3530111333300000"
    first = redact_episode(episode(text=f"{cards} at 1748503543012 1548138160707 1748503543012"), R)
    assert redactions_added(None, first) == {"CARD": 5}
    rec = new_record(None, first, 100.0, settle_window_s=60, retention_days=30, user_hash_="h")
    again = redact_episode(episode(revision=1, text=f"{cards} at 1748503543012 and jane@x.io"), R)
    assert redactions_added(rec, again) == {"EMAIL": 1}
    fewer = redact_episode(episode(revision=2, text="4111 1111 1111 1111"), R)
    assert redactions_added(rec, fewer) == {}


def test_user_hash_is_keyed_by_the_tenant_secret() -> None:
    assert user_hash("s1", "u") != user_hash("s2", "u") and len(user_hash("s1", "u")) == 64
    assert user_hash("s1", "") == ""


def stored(ep: IngestEpisode, now: float = 100.0) -> EpisodeRecord:
    return new_record(None, redact_episode(ep, R), now, settle_window_s=60, retention_days=30, user_hash_="h")


def test_upsert_decisions() -> None:
    rec = stored(episode(revision=1))
    assert decide_upsert(None, redact_episode(episode(), R)) == S.STATUS_ACCEPTED
    assert decide_upsert(rec, redact_episode(episode(revision=1), R)) == S.STATUS_DUPLICATE
    assert decide_upsert(rec, redact_episode(episode(revision=0), R)) == S.STATUS_SUPERSEDED
    assert decide_upsert(rec, redact_episode(episode(revision=2, text="more"), R)) == S.STATUS_ACCEPTED
    with pytest.raises(IngestError) as err:
        decide_upsert(rec, redact_episode(episode(revision=1, text="other"), R))
    assert err.value.status == 409 and err.value.param == "revision"
    rec.state = ST.STATE_SETTLED
    assert decide_upsert(rec, redact_episode(episode(revision=5, text="later"), R)) == S.STATUS_SUPERSEDED


def test_state_machine_and_feedback_placement() -> None:
    rec = stored(episode(), now=100.0)
    assert rec.state == ST.STATE_OPEN and advance(rec, 150.0, 60, idle_close_s=1000) is None
    assert advance(rec, 1100.0, 60, idle_close_s=1000) == ST.STATE_CLOSED
    ended = new_record(rec, redact_episode(episode(revision=1, ended=True), R), 200.0, 60, 30, "")
    assert ended.state == ST.STATE_CLOSED and ended.settle_deadline_unix_s == 260.0 and ended.user_hash == "h"
    assert advance(ended, 259.0, 60, 1000) is None and advance(ended, 260.0, 60, 1000) == ST.STATE_SETTLED

    fb = Feedback(feedback_id="f1", episode_id="ep-1", kind=Feedback.KIND_THUMBS, value=1)
    assert place_feedback(None, fb) == (S.STATUS_BUFFERED, None)
    status, with_fb = place_feedback(ended, fb)
    assert status == S.STATUS_APPLIED and with_fb is not None and len(with_fb.feedback) == 1
    assert place_feedback(with_fb, fb) == (S.STATUS_DUPLICATE, None)
    with_fb.state = ST.STATE_SETTLED
    late = Feedback(feedback_id="f2", episode_id="ep-1", kind=Feedback.KIND_THUMBS, value=-1)
    status, after = place_feedback(with_fb, late)
    assert status == S.STATUS_LATE and after is not None and after.late_feedback == 1 and len(after.feedback) == 1
    shown = status_of(after)
    assert (shown.state, shown.feedback, shown.late_feedback, shown.messages) == (ST.STATE_SETTLED, 1, 1, 2)


def test_retention_is_the_shorter_of_consent_and_config() -> None:
    ep = episode()
    ep.consent.retention_days = 2
    assert stored(ep, now=0.0).expires_unix_s == 2 * 86400.0
    ep.consent.retention_days = 90
    assert stored(ep, now=0.0).expires_unix_s == 30 * 86400.0
