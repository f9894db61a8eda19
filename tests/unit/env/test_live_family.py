"""Live tasks: the episode, the answer check and the admission rule (pure parts)."""

from __future__ import annotations

import hashlib

import pytest

from services.env.acceptance import live_verdict
from services.env.families.base import TaskSpec
from services.env.families.live import LiveFamily, LiveTask, answer_matches, live_seed
from services.env.live_tasks import is_heldout, live_slot_id

CID = "ab" * 32


@pytest.mark.parametrize(("answer", "won"), [
    ("\\boxed{42}", True), ("The answer is 42.", True), ("\\boxed{ 42 }", True), ("142", False),
    ("\\boxed{41} but maybe 42", False), ("", False), ("Paris, France", False),
])
def test_the_reference_must_appear_as_a_whole_in_the_final_answer(answer: str, won: bool) -> None:
    assert answer_matches(answer, "42") is won


def test_a_live_episode_shows_the_conversation_and_the_hint_only_in_the_easier_variant() -> None:
    family = LiveFamily()
    seed = family.add(LiveTask(CID, "[user]\n<<<\nWhat is 17+25?\n>>>", "42", hint="it is 42, not 41"))
    assert seed == live_seed(CID) == int(CID[:15], 16)
    plain = family.make_episode(TaskSpec("live", {"hint": 0.0}, seed), 0)
    hinted = family.make_episode(TaskSpec("live", {"hint": 1.0}, seed), 0)
    assert plain.single_turn and "hint" not in plain.observation and "it is 42, not 41" in hinted.observation
    assert family.oracle_plan_length(TaskSpec("live", {"hint": 0.0}, seed)) == 1
    result = plain.step("\\boxed{42}")
    assert result.won and result.terminated and plain.step("x").won is False
    with pytest.raises(Exception, match="not loaded"):
        family.make_episode(TaskSpec("live", {"hint": 0.0}, 7), 0)


def test_admission_of_a_live_task() -> None:
    assert live_verdict(0.5, 0, False, heldout=False).split == "train"
    admitted = live_verdict(0.25, 1, True, heldout=True)
    assert (admitted.split, admitted.accepted) == ("live_heldout", True) and "0 < acc=0.250 < 1" in admitted.reason
    retry = live_verdict(0.0, 0, True, heldout=False)
    assert (retry.split, retry.hint, retry.accepted) == (None, 1.0, False)
    assert live_verdict(0.0, 1, True, heldout=False).split == "live_rejected"
    assert live_verdict(0.0, 0, False, heldout=False).split == "live_rejected"
    assert live_verdict(1.0, 0, True, heldout=False).split == "live_solved"
    with pytest.raises(ValueError):
        live_verdict(1.5, 0, False, heldout=False)


def test_slot_ids_and_the_held_out_share() -> None:
    assert live_slot_id(CID) == "live/" + CID[:16]
    ids = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(2000)]
    assert 160 <= sum(is_heldout(c, 10) for c in ids) <= 240 and not any(is_heldout(c, 0) for c in ids)
