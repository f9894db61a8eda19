"""`reasoning_gym`: single-turn verifiable tasks from reasoning-gym, its curriculum as difficulty.

One family instance serves one reasoning-gym dataset (e.g. ``basic_arithmetic``). The knob
``level`` is the curriculum's global level (`BaseCurriculum.set_global_level`); the task seed
picks the question; the dataset's own `score_answer` is the verifier (reward in [0, 1]) and the
gold answer is the oracle's one-step plan.
"""

from __future__ import annotations

import hashlib
from typing import Any

from reasoning_gym.factory import DATASETS, create_curriculum

from services.common.errors import InvalidArgumentError
from services.env.families.base import Knob, SingleTurnEpisode, TaskFamily, TaskSpec

__all__ = ["ReasoningGymFamily", "normalise_answer"]


_SIGNS = str.maketrans({"\u2212": "-", "\ufe63": "-", "\uff0d": "-", "\uff0b": "+"})


def normalise_answer(text: str) -> str:
    """The answer as the dataset's verifier expects it: stripped, with the Unicode minus signs
    (U+2212, U+FE63, U+FF0D) and the fullwidth plus (U+FF0B) written as ASCII ``-`` and ``+``
    ("−1" is the gold answer "-1"; models trained on typeset text write it)."""
    return text.strip().translate(_SIGNS)


class ReasoningGymEpisode(SingleTurnEpisode):
    """One question, scored by the dataset's verifier."""

    def __init__(self, dataset: Any, entry: dict[str, Any]) -> None:
        super().__init__(str(entry["question"]), str(entry["question"]))
        self.dataset = dataset
        self.entry = entry

    def score(self, action: str) -> float:
        """The dataset's verifier's score of ``action`` (normalised, `normalise_answer`)."""
        return float(self.dataset.score_answer(normalise_answer(action), self.entry))

    def gold_answer(self) -> str:
        return str(self.entry["answer"])


class ReasoningGymFamily(TaskFamily):
    """Single-turn reasoning-gym tasks of one dataset, difficulty from its curriculum."""

    name = "reasoning_gym"
    library = "reasoning-gym"
    max_steps = 1

    def __init__(self, dataset: str = "basic_arithmetic") -> None:
        if dataset not in DATASETS:
            raise InvalidArgumentError(f"reasoning_gym dataset {dataset!r} is not registered")
        self.dataset_name = dataset
        curriculum = create_curriculum(dataset)
        top = max((len(attr.levels) - 1 for attr in curriculum.attributes.values()), default=0)
        self.knobs = (Knob("level", 0, float(top), 1,
                           description=f"global curriculum level of {dataset}"),)

    def _question(self, spec: TaskSpec) -> tuple[Any, dict[str, Any]]:
        """The dataset of ``spec`` and its one entry (question, gold answer, metadata)."""
        self.validate(spec)
        curriculum = create_curriculum(self.dataset_name)
        curriculum.set_global_level(int(spec.knobs["level"]))
        config = curriculum.generate_configuration({"seed": spec.seed, "size": 1})
        dataset_cls, _ = DATASETS[self.dataset_name]
        dataset = dataset_cls(config=config)
        return dataset, dataset[0]

    def make_episode(self, spec: TaskSpec, episode_seed: int) -> ReasoningGymEpisode:
        """The question picked by the task seed at the task's curriculum level."""
        return ReasoningGymEpisode(*self._question(spec))

    def instance_key(self, spec: TaskSpec) -> str:
        """The dataset and a hash of the question and its gold answer: a level-0 curriculum holds
        only a few hundred distinct questions, so different seeds (and levels) ask the same one.

        Raises:
            InvalidArgumentError: knobs out of bounds (`validate`).
        """
        _, entry = self._question(spec)
        digest = hashlib.sha256(f"{entry['question']}\x1f{entry['answer']}".encode()).hexdigest()[:32]
        return f"{self.name}:{self.dataset_name}:{digest}"
