"""Proposers: turn a too-easy or too-hard task into a candidate variant (loop 3).

`ParametricProposer` moves one difficulty knob of the family by one notch; the RM's bad-step
feedback picks which knob (see each family's `knob_preference`). Text tasks can instead get
variants written by a model (`services.env.model_proposer`, used by `Adaptation` directly: it is
asynchronous and stores the new task's text).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rlanything.v1.events_pb2 import DIRECTION_HARDER, TaskReport

from services.env.families.base import Knob, TaskFamily, TaskSpec

__all__ = ["Proposal", "Proposer", "ParametricProposer", "bad_step_share", "moves_difficulty"]


def moves_difficulty(direction: int, parent_plan: int, plan: int) -> bool:
    """Does a candidate's oracle plan length (steps) move the way ``direction`` asks?

    Harder: strictly longer than the parent's plan (a longer walk past more holes); easier: no
    longer. A knob move alone does not guarantee it: the variant is a new random map (new seed),
    and a measured 4×4 "harder" variant (hole_prob 0.2 → 0.25) was as often easier as harder.
    A parent without a known plan (0) accepts any candidate.
    """
    if parent_plan <= 0:
        return True
    return plan > parent_plan if direction == DIRECTION_HARDER else plan <= parent_plan


@dataclass(frozen=True)
class Proposal:
    """A candidate task: the new knobs and seed, and what changed (for the event's reason)."""

    spec: TaskSpec
    note: str
    reseed: bool = False
    """Same knobs, another task: its difficulty must move strictly (an equal plan is no easier)."""
    same_task: bool = False
    """The same task with a `Knob.same_task` knob moved: the knob alone moves the difficulty (the
    oracle plan does not change, so it is not asked to)."""


def bad_step_share(report: TaskReport, plan_length: int) -> float:
    """Bad steps per failed rollout relative to the oracle plan length, clipped to [0, 1].

    A bad step is one that every RM vote called bad (critic feedback). 0 when nothing failed.
    """
    failed = len(report.bad_steps)
    if failed == 0:
        return 0.0
    total = sum(len(b.step_indices) for b in report.bad_steps)
    return min(1.0, total / (failed * max(1, plan_length)))


class Proposer(ABC):
    """Makes a candidate variant of a task in the requested direction."""

    @abstractmethod
    def propose(self, family: TaskFamily, parent: TaskSpec, direction: int, report: TaskReport,
                plan_length: int, attempt: int, try_index: int = 0, rejected: int = 0) -> Proposal | None:
        """A candidate, or None when no variant can be made (every knob at its bound).

        ``attempt`` differs for each proposal of a slot, so a rejected candidate is not proposed
        again identically. ``try_index`` counts the tries of one proposal (0, 1, ...) when the
        previous try did not move the difficulty the asked way (`moves_difficulty`). ``rejected``
        is how many of the slot's candidates were rejected so far.
        """


def _returns_to_default(knob: Knob, knobs: Mapping[str, float], harder: bool) -> bool:
    """Does moving ``knob`` the asked way bring it back toward its default (undo an earlier move)?"""
    default = knob.default if knob.default is not None else knob.low
    value = knobs.get(knob.name, default)
    up = harder == knob.harder_is_higher
    return value > default if not up else value < default


class ParametricProposer(Proposer):
    """Moves the first knob (in the family's preferred order) that can move one step.

    With ``reseed_tries`` > 0 the first tries keep the knobs and draw another task of the same
    family (a new seed) whose oracle plan is strictly longer (harder) or shorter (easier): a
    smaller step than a knob move. Measured on 4×4 FrozenLake with the window view (the run
    viewer's pool history): size 4 → 5 took candidates from acc 0.88 to 0.13 and 4 → 3 from 0 to
    1.0, both out of the band and rejected.
    """

    def __init__(self, bad_step_threshold: float = 0.3, reseed_tries: int = 0, same_task_first: bool = False,
                 same_task_knobs: Sequence[str] = ()) -> None:
        self.bad_step_threshold = bad_step_threshold
        self.reseed_tries = reseed_tries
        self.same_task_first = same_task_first
        """Try the family's `Knob.same_task` knobs (e.g. gym_text's slip) before its preference order."""
        self.same_task_knobs = tuple(same_task_knobs)
        """Only these same-task knobs move (empty: all of a family's)."""

    def propose(self, family: TaskFamily, parent: TaskSpec, direction: int, report: TaskReport,
                plan_length: int, attempt: int, try_index: int = 0, rejected: int = 0) -> Proposal | None:
        """Odd tries (after the reseeds) start from the next knob in the preference order (a 4×4 map
        with one more hole rarely has a longer plan; a 5×5 one always does). A same-task knob
        moves ``1 + rejected % 3`` steps: the same variant again after a rejection would be
        rejected again (its task and knobs are the same), a larger step may not."""
        harder = direction == DIRECTION_HARDER
        share = bad_step_share(report, plan_length)
        seed = (parent.seed * 7919 + attempt) % (2**31 - 1)
        if try_index < self.reseed_tries and plan_length > 0:
            note = (f"{'harder' if harder else 'easier'}: same knobs, another task (seed {seed}) with a "
                    f"{'longer' if harder else 'shorter'} plan (bad-step share {share:.2f})")
            return Proposal(TaskSpec(parent.family, dict(parent.knobs), seed), note, reseed=True)
        try_index -= self.reseed_tries if plan_length > 0 else 0
        order = family.knob_preference(harder, share)
        if self.same_task_first:  # a knob moved away from its default earlier goes back first
            same = [k.name for k in sorted((k for k in family.knobs if k.same_task and
                                            (not self.same_task_knobs or k.name in self.same_task_knobs)),
                                           key=lambda k: not _returns_to_default(k, parent.knobs, harder))]
            order = same + [name for name in order if name not in same]
            shift = 0 if any(family.move_knob(parent.knobs, name, harder) for name in same) else try_index
        else:
            shift = try_index
        shift %= max(1, len(order))
        for name in order[shift:] + order[:shift]:
            knobs = family.move_knob(parent.knobs, name, harder)
            if knobs is None:
                continue
            knob = next(k for k in family.knobs if k.name == name)
            for _ in range(rejected % 3 if knob.same_task else 0):
                further = family.move_knob(knobs, name, harder)
                if further is None:
                    break
                knobs = further
            before = parent.knobs.get(name, knob.default if knob.default is not None else knob.low)
            if knob.same_task:
                note = (f"{'harder' if harder else 'easier'}: {name} {before:g} -> {knobs[name]:g} on the same task "
                        f"(seed {parent.seed}; bad-step share {share:.2f})")
                return Proposal(TaskSpec(parent.family, knobs, parent.seed), note, same_task=True)
            note = (f"{'harder' if harder else 'easier'}: {name} {before:g} -> {knobs[name]:g}, "
                    f"seed {seed} (bad-step share {share:.2f})")
            return Proposal(TaskSpec(parent.family, knobs, seed), note)
        return None


def check_same_task_knobs(families: Iterable[TaskFamily], names: Sequence[str]) -> None:
    """Every name in ``env.adaptation.same_task_knobs`` is a same-task knob of a configured family.

    Raises:
        ValueError: a name that is not (the message names it and the knobs there are).
    """
    known = sorted({k.name for f in families for k in f.knobs if k.same_task})
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"env.adaptation.same_task_knobs: {unknown} are not same-task knobs of the configured "
                         f"families (those are {known})")
