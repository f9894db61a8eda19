"""Which settled live episodes become environment tasks (services/ingest/candidates.py)."""

from __future__ import annotations

from rlanything.v1.ingest_pb2 import Consent, Feedback, IngestEpisode, IngestMessage, Outcome, SettledEpisode
from rlanything.v1.ingest_pb2 import OUTCOME_SOURCE_REFERENCE_CHECK as REF
from services.ingest.candidates import candidate_id, task_candidate


def settled(*feedback: Feedback, consent: bool = True, outcome: Outcome | None = None, user: str = "What is 17+25?",
            episode_id: str = "e1") -> SettledEpisode:
    ep = IngestEpisode(tenant="acme", episode_id=episode_id, task_type="math",
                       consent=Consent(training=True, task_generation=consent),
                       messages=[IngestMessage(role="user", content=user),
                                 IngestMessage(role="assistant", content="41", turn_id="t1")])
    if outcome is not None:
        ep.outcome.CopyFrom(outcome)
    return SettledEpisode(episode=ep, feedback=list(feedback))


def test_a_failure_with_a_reference_and_consent_becomes_a_candidate() -> None:
    cand = task_candidate(settled(outcome=Outcome(value=-1, source=REF, reference="42")), now=5.0)
    assert cand is not None and (cand.reference, cand.hint, cand.task_type) == ("42", "", "math")
    assert cand.prompt == "[user]\n<<<\nWhat is 17+25?\n>>>" and cand.source_trajectory_id == "live/acme/e1"
    assert cand.candidate_id == candidate_id("acme", "math", cand.prompt) and len(cand.candidate_id) == 64
    fixed = Feedback(kind=Feedback.KIND_CORRECTION, text="it is 42", created_unix_s=1)
    by_correction = task_candidate(settled(fixed), 5.0)
    assert by_correction is not None and (by_correction.reference, by_correction.hint) == ("it is 42", "it is 42")


def test_no_candidate_without_consent_failure_or_reference() -> None:
    bad = Outcome(value=-1, source=REF, reference="42")
    assert task_candidate(settled(outcome=bad, consent=False), 0) is None
    assert task_candidate(settled(outcome=Outcome(value=1, source=REF, reference="42")), 0) is None
    assert task_candidate(settled(Feedback(kind=Feedback.KIND_THUMBS, turn_id="t1", value=-1)), 0) is None  # no ref
    assert task_candidate(settled(), 0) is None


def test_the_same_failure_from_two_users_is_one_candidate() -> None:
    bad = Outcome(value=-1, source=REF, reference="42")
    a = task_candidate(settled(outcome=bad, episode_id="e1"), 0)
    b = task_candidate(settled(outcome=bad, user="what  is 17+25? ", episode_id="e2"), 0)
    assert a is not None and b is not None and a.candidate_id == b.candidate_id
    other = task_candidate(settled(outcome=bad, user="What is 18+25?"), 0)
    assert other is not None and other.candidate_id != a.candidate_id
