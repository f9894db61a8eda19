"""`live`: single-turn tasks made from a product's real failures (docs/live-usage.md).

Each task is one `LiveTaskCandidate` from the ingest service: the conversation before a reply the
user rejected (redacted), the reference answer, and the user's correction as a hint. The task's
seed is derived from the candidate's content hash (`live_seed`), and its content lives in the
env's KV bucket ``live_tasks``; this family reads it from an in-process mirror (`add`), so
`make_episode` stays synchronous as the `TaskFamily` contract requires.

The episode shows the conversation (and, with knob ``hint`` = 1, the user's correction); the
answer wins when the reference appears in it as a whole token sequence after normalisation
(case, whitespace, Unicode minus signs, a final ``\\boxed{}`` unwrapped). The oracle's plan is the
reference itself, so every live task is solvable by construction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.common.answers import last_boxed
from services.common.errors import InvalidArgumentError
from services.env.families.base import Knob, SingleTurnEpisode, TaskFamily, TaskSpec

__all__ = ["LiveTask", "LiveFamily", "live_seed", "answer_matches", "LIVE_TASK_TEXT"]

LIVE_TASK_TEXT = "Reply to the user's last message in this conversation. Give the answer in \\boxed{}."
_SIGNS = str.maketrans({"\u2212": "-", "\ufe63": "-", "\uff0d": "-"})


def live_seed(candidate_id: str) -> int:
    """The task seed of a candidate: its content hash's first 15 hex digits (fits an int64)."""
    return int(candidate_id[:15], 16)


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text.translate(_SIGNS)).strip().casefold().rstrip(".!")


def answer_matches(answer: str, reference: str) -> bool:
    """The reference appears in the answer (its last ``\\boxed{}`` if it has one) as a whole token
    sequence, after normalisation (pure)."""
    ref = _normal(reference)
    if not ref:
        return False
    boxed = last_boxed(answer)
    text = _normal(boxed if boxed is not None else answer)
    return re.search(rf"(?<!\w){re.escape(ref)}(?!\w)", text) is not None


@dataclass(frozen=True)
class LiveTask:
    """The content of one live task (redacted by the ingest service)."""

    candidate_id: str
    prompt: str
    reference: str
    hint: str = ""
    task_type: str = "chat"
    tenant: str = ""


class LiveEpisode(SingleTurnEpisode):
    """One reply to a real conversation, scored against the reference."""

    answered = "The conversation was already answered."

    def __init__(self, task: LiveTask, show_hint: bool) -> None:
        hint = f"\n[hint from the user]\n{task.hint}" if show_hint and task.hint else ""
        super().__init__(LIVE_TASK_TEXT, task.prompt + hint)
        self.task = task

    def score(self, action: str) -> float:
        """1 when the reply holds the reference (`answer_matches`), else 0."""
        return 1.0 if answer_matches(action, self.task.reference) else 0.0

    def gold_answer(self) -> str:
        return f"\\boxed{{{self.task.reference}}}"


class LiveFamily(TaskFamily):
    """Tasks from real failures; knob ``hint`` (0/1): the easier variant shows the user's correction."""

    name = "live"
    max_steps = 1
    knobs = (Knob("hint", 0, 1, 1, harder_is_higher=False, description="show the user's correction (1) or not (0)"),)

    def __init__(self) -> None:
        self.tasks: dict[int, LiveTask] = {}

    def add(self, task: LiveTask) -> int:
        """Make ``task`` available (idempotent); returns its seed."""
        seed = live_seed(task.candidate_id)
        self.tasks[seed] = task
        return seed

    def instance_key(self, spec: TaskSpec) -> str:
        """``live:<seed>``: the seed is already the task's content hash (`live_seed`); the ``hint``
        knob shows a correction on the same task, so it is left out."""
        return f"{self.name}:{spec.seed}"

    def make_episode(self, spec: TaskSpec, episode_seed: int) -> LiveEpisode:
        """The live task of ``spec.seed``.

        Raises:
            InvalidArgumentError: the task's content is not loaded in this process (yet).
        """
        self.validate(spec)
        task = self.tasks.get(spec.seed)
        if task is None:
            raise InvalidArgumentError(f"live task with seed {spec.seed} is not loaded in this env process")
        return LiveEpisode(task, bool(spec.knobs.get("hint", 0)))
