"""The task-family contract: what the env service needs from an environment library.

A *task* is a family, a set of difficulty knobs and a seed (`TaskSpec`). A family turns a task
into episodes (`Episode`: reset → step ... → done), knows whether a task is solvable and how long
its oracle plan is, and moves its knobs one notch harder or easier for the parametric proposer.
Families adapt real libraries (TextWorld, Gymnasium, reasoning-gym); no home-made games.
"""

from __future__ import annotations

import importlib.metadata
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field

from rlanything.v1.events_pb2 import CodeCheck

from services.common.errors import InvalidArgumentError
from services.common.seeding import derive_seed

__all__ = ["TaskSpec", "StepResult", "Episode", "SingleTurnEpisode", "Knob", "TaskFamily", "rollout_instance"]


@dataclass(frozen=True)
class TaskSpec:
    """One task: everything needed to build it again, anywhere."""

    family: str
    """Family name, e.g. ``"gym_text"``."""
    knobs: Mapping[str, float]
    """Difficulty knobs of the family (integers are stored as floats)."""
    seed: int
    """Seed of the task itself (which map / which game / which question)."""

    def key(self) -> str:
        """A stable cache key: family, sorted knobs and seed."""
        knobs = "-".join(f"{k}{self.knobs[k]:g}" for k in sorted(self.knobs))
        return f"{self.family}-{knobs}-s{self.seed}"


def rollout_instance(spec: TaskSpec, episode_seed: int) -> TaskSpec:
    """The instance one rollout plays when a task stands for its knobs, not one instance
    (``FamilyConfig.train_instances: rollout``): same family and knobs, a seed in [0, 2**31)
    derived from the task's seed and the rollout's episode seed (pure; `derive_seed`)."""
    return TaskSpec(spec.family, dict(spec.knobs), derive_seed("instance", int(spec.seed), int(episode_seed)) % 2**31)


@dataclass(frozen=True)
class StepResult:
    """What one environment step returns (Gymnasium's split of done into terminated/truncated)."""

    observation: str
    admissible_actions: tuple[str, ...]
    reward: float
    terminated: bool
    """The episode ended inside the environment (won, lost, or a single-turn answer given)."""
    won: bool
    oracle_plan_length: int | None
    """Steps of the oracle's winning plan from the new state; 0 after a win, None = no oracle."""
    oracle_label: int | None = None
    """The step's `StepLabel` when the environment decides it itself (a remote server); None: it is
    derived from the plan lengths before and after (`services.env.oracle.step_label`)."""
    test_verdicts: tuple[str, ...] = ()
    """Code families: each ground-truth test's verdict (`services.common.sandbox.Verdict` values)."""


class Episode(ABC):
    """One running episode of a task. Not thread-safe; the session layer serialises calls."""

    task_text: str
    """The goal, shown to the agent at every step."""
    observation: str
    """The current observation."""
    admissible_actions: tuple[str, ...]
    """Actions the agent may choose from now (empty for single-turn tasks: answer freely)."""
    single_turn: bool = False
    code_check: CodeCheck | None = None
    """Code tasks: the problem's input validator, reference and checker, for the critic to score the unit
    tests a reward model writes (`ResetResponse.code_check`); None for other tasks."""
    screenshot_png: bytes = b""
    """The current screen as PNG bytes (families with screenshots, e.g. ``web`` with ``screenshots: true``;
    empty otherwise)."""

    @abstractmethod
    def step(self, action: str) -> StepResult:
        """Apply ``action`` (any text; an inadmissible action must not crash the episode)."""

    @abstractmethod
    def oracle_plan(self) -> list[str] | None:
        """The oracle's winning action list from the current state ([] when won, None = no oracle)."""

    def close(self) -> None:
        """Release library resources (subprocesses, files)."""


class SingleTurnEpisode(Episode):
    """One question, one answer: the first step is scored (`score`) and ends the episode; the
    oracle's plan is the gold answer (`gold_answer`). A family's single-turn episode sets
    ``task_text`` and ``observation`` and implements the two."""

    single_turn = True
    answered = "The question was already answered."
    """The observation of a step after the answer (nothing changes then)."""

    def __init__(self, task_text: str, observation: str) -> None:
        self.task_text = task_text
        self.observation = observation
        self.admissible_actions = ()
        self.done = False

    @abstractmethod
    def score(self, action: str) -> float:
        """The reward of ``action`` as the answer, in [0, 1]; 1 is a win."""

    @abstractmethod
    def gold_answer(self) -> str:
        """An answer that wins."""

    def step(self, action: str) -> StepResult:
        """Score ``action`` as the answer; the episode ends after it (a later step scores 0)."""
        if self.done:
            return StepResult(self.answered, (), 0.0, True, False, None)
        self.done = True
        reward = float(self.score(action))
        won = reward >= 1.0
        self.observation = "Correct." if won else "Incorrect."
        return StepResult(self.observation, (), reward, True, won, 0 if won else None)

    def oracle_plan(self) -> list[str] | None:
        """The gold answer as a one-step plan ([] once answered)."""
        return [] if self.done else [self.gold_answer()]


@dataclass(frozen=True)
class Knob:
    """One difficulty knob: its bounds and the step the parametric proposer moves it by."""

    name: str
    low: float
    high: float
    step: float
    harder_is_higher: bool = True
    integer: bool = True
    description: str = field(default="", compare=False)
    default: float | None = None
    """The value of a task that does not set the knob (None: every task must set it)."""
    same_task: bool = False
    """Moving it keeps the task itself (same seed, e.g. the same map with other dynamics), so its
    difficulty moves with the knob alone; other knobs make a new task (a new seed)."""


class TaskFamily(ABC):
    """Adapter from one environment library to RLAnything's task contract."""

    name: str
    knobs: tuple[Knob, ...]
    max_steps: int
    """Default step budget of an episode."""
    library: str = ""
    """PyPI distribution that builds the tasks (e.g. "reasoning-gym"); "" for none."""
    max_open_episodes: int | None = None
    """How many episodes may be open at once in one process (the ``web`` family: its browsers);
    None = no bound. In-process players (the cold start's evaluation) play no more at once."""

    def metadata(self) -> dict[str, str]:
        """What a task of this family records about its origin (``TaskVersion.metadata``):
        ``library`` and the installed ``library_version`` ("unknown" if it is not installed as a
        distribution). The same knobs and seed can build another task under another version."""
        if not self.library:
            return {}
        try:
            version = importlib.metadata.version(self.library)
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        return {"library": self.library, "library_version": version}

    def instance_key(self, spec: TaskSpec) -> str:
        """What the agent plays when it plays ``spec``, as a string: two specs with the same key are
        the same instance (`services.env.disjoint` keeps every training instance's key out of the
        held-out and OOD keys).

        The default is the spec itself (family, knobs and seed, `TaskSpec.key`): right for families
        where another seed or knob value gives another instance. A family whose different seeds can
        build the same instance (a small map space, a question bank) overrides it with the content.
        The key starts with the family name, so families never share keys.
        """
        return spec.key()

    def validate(self, spec: TaskSpec) -> None:
        """Check a spec's family and knobs.

        Raises:
            InvalidArgumentError: wrong family, unknown or missing knob, or a value out of bounds
                (the message names the knob, the value and the bounds).
        """
        if spec.family != self.name:
            raise InvalidArgumentError(f"task family {spec.family!r} given to family {self.name!r}")
        names = {k.name for k in self.knobs}
        unknown = set(spec.knobs) - names
        if unknown:
            raise InvalidArgumentError(f"{self.name}: unknown knob(s) {sorted(unknown)}; knobs are {sorted(names)}")
        for knob in self.knobs:
            if knob.name not in spec.knobs:
                if knob.default is not None:
                    continue
                raise InvalidArgumentError(f"{self.name}: knob {knob.name!r} is missing")
            value = spec.knobs[knob.name]
            if not knob.low <= value <= knob.high:
                raise InvalidArgumentError(
                    f"{self.name}: knob {knob.name}={value:g} outside [{knob.low:g}, {knob.high:g}]")

    def start(self) -> None:
        """Start what the family's episodes need before the service serves (the ``code`` family's
        sandbox); the default does nothing. A family that cannot start raises, and the service with it."""

    def close(self) -> None:
        """Stop what `start` started and release what the family holds across episodes (the ``code``
        family's sandbox, the ``web`` family's browsers); the default does nothing. Called when the
        env service stops."""

    def prepare(self, spec: TaskSpec) -> None:
        """Build and cache whatever the task needs (slow work, e.g. compiling a game).

        Called off the request path before a task enters the pool; the default does nothing.
        """

    @abstractmethod
    def make_episode(self, spec: TaskSpec, episode_seed: int) -> Episode:
        """Start an episode of ``spec``; ``episode_seed`` varies stochastic parts only."""

    def oracle_plan_length(self, spec: TaskSpec) -> int | None:
        """Length of the oracle's winning plan from the start; None when the task is unsolvable.

        The default plays a fresh episode's `oracle_plan`; families with no oracle return 1.
        """
        episode = self.make_episode(spec, 0)
        try:
            plan = episode.oracle_plan()
        finally:
            episode.close()
        return None if plan is None else len(plan)

    def load_version(self, metadata: Mapping[str, str]) -> None:
        """Take what a task version's metadata carries that its knobs and seed only name (the ``web``
        family: a model-written instruction); called before an episode of that version is built.
        The default takes nothing."""

    def move_knob(self, knobs: Mapping[str, float], name: str, harder: bool) -> dict[str, float] | None:
        """``knobs`` with knob ``name`` moved one step harder or easier; None at its bound."""
        knob = next(k for k in self.knobs if k.name == name)
        sign = 1.0 if harder == knob.harder_is_higher else -1.0
        value = knobs.get(name, knob.default if knob.default is not None else knob.low) + sign * knob.step
        value = round(value) if knob.integer else round(value, 4)
        if not knob.low <= value <= knob.high:
            return None
        return {**knobs, name: float(value)}

    def knob_preference(self, harder: bool, bad_step_share: float) -> list[str]:
        """Knob names in the order the parametric proposer tries them.

        ``bad_step_share`` is the share of failed-rollout steps all RM votes called bad (critic
        feedback). The default ignores it; families override to pick a knob from it.
        """
        return [k.name for k in self.knobs]
