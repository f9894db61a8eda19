"""The ``textworld`` task family: multi-step text games generated offline by TextWorld.

Games come from TextWorld's ``tw-make custom`` generator (Côté et al. 2018, "TextWorld: A Learning
Environment for Text-based Games", arXiv:1806.11532); the wheel ships the Inform7 compiler, so no
network is needed. A task is ``(world_size, nb_objects, quest_length, seed)``; its compiled game is
cached on disk under ``TaskSpec.key()``. The oracle is TextWorld's own ``policy_commands``: the
winning command list from the current state, recomputed after every step. A step is good when it
shortens that list, which gives exact step labels for measuring the reward model.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import textworld
from jericho.jericho import UnsupportedGameWarning
from textworld import EnvInfos

from services.common.errors import InvalidArgumentError, RLAnythingError, TransientError
from services.env.families.base import Episode, Knob, StepResult, TaskFamily, TaskSpec

__all__ = ["TextWorldFamily", "TextWorldEpisode", "clean_feedback", "is_chained", "game_identity", "CHAINED_REFUSAL"]

_REQUEST_INFOS = EnvInfos(admissible_commands=True, policy_commands=True, won=True, lost=True,
                          objective=True, description=True, inventory=True, score=True)
_BANNER_LINE = re.compile(r"^[\s_|\\/$<>]*$")
"""A line of TextWorld's ASCII-art welcome banner (only drawing characters)."""
_STATUS_LINE = re.compile(r"\n>[^\n]*\Z")
"""The trailing prompt ``>`` followed by the status bar (``-= Room =-score/moves``)."""
_KNOB_ORDER = {  # (harder, many bad steps) -> knob order; the rule is in `knob_preference`
    (False, True): ("world_size", "nb_objects", "quest_length"),
    (False, False): ("quest_length", "world_size", "nb_objects"),
    (True, False): ("quest_length", "world_size", "nb_objects"),
    (True, True): ("nb_objects", "world_size", "quest_length"),
}
_MAX_ACTION_BYTES = 190
_CHAIN = re.compile(r"\bthen\b|[.;!?](?=\s*\S)", re.IGNORECASE)
"""What makes TextWorld's parser run several commands: "then", or a sentence break before more text."""
CHAINED_REFUSAL = "One command at a time, please: nothing happened."


def is_chained(command: str) -> bool:
    """Does ``command`` hold several commands ("a then b", "a. b", "a; b")? (pure)"""
    return bool(_CHAIN.search(command.strip()))
"""Jericho truncates (with a warning) commands of 198 bytes or more."""


def clean_feedback(text: str) -> str:
    """TextWorld feedback without the ASCII banner, the trailing prompt/status bar and blank runs."""
    text = _STATUS_LINE.sub("", text.rstrip())
    lines = text.split("\n")
    while lines and _BANNER_LINE.match(lines[0]):
        lines.pop(0)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def game_identity(game: dict) -> str:
    """A hash of what a TextWorld game is to the player (pure): its world's facts, its entities'
    ids, types and names, and each quest's winning commands — not the generator's metadata (its
    uuid names the seed), the grammar options or the randomly worded objective and descriptions.

    Raises:
        KeyError: ``game`` lacks ``world``, ``infos`` or ``quests`` (not a TextWorld ``game.json``).
    """
    entities = sorted((str(e.get("id")), str(e.get("type")), str(e.get("name"))) for _, e in game["infos"])
    quests = [list(q.get("commands") or []) for q in game["quests"]]
    blob = json.dumps({"world": game["world"], "entities": entities, "quests": quests}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


class TextWorldEpisode(Episode):
    """One play-through of a compiled TextWorld game (``textworld.start``, in-process Jericho).

    TextWorld games are deterministic, so the episode seed changes nothing.
    """

    def __init__(self, game_file: Path) -> None:
        """Open ``game_file`` (a ``.z8`` with its ``.json`` next to it) and reset it."""
        with warnings.catch_warnings():  # every TextWorld game lacks Jericho's per-game score hooks
            warnings.simplefilter("ignore", UnsupportedGameWarning)
            self._env = textworld.start(str(game_file), request_infos=_REQUEST_INFOS)
            state = self._env.reset()
        self.task_text: str = state["objective"]
        self._score = float(state["score"] or 0)
        self._terminated = False
        self._won = False
        self._absorb(state)

    def _absorb(self, state: textworld.GameState) -> None:
        self.observation = clean_feedback(state.feedback)
        self._won = bool(state["won"])
        self._terminated = self._won or bool(state["lost"]) or bool(state.get("done"))
        self.admissible_actions = () if self._terminated else tuple(sorted(state["admissible_commands"]))
        plan = list(state["policy_commands"] or [])
        self._plan: list[str] | None = [] if self._won else (plan or None)

    def step(self, action: str) -> StepResult:
        """Apply ``action``; unknown text gets TextWorld's own refusal and changes nothing.

        The action is flattened to one line and cut to 190 UTF-8 bytes. A command that chains
        several (`is_chained`) is refused and changes nothing: one step is one action. After the game ended,
        further steps return the final state again with reward 0. The reward is the change of the
        game's score (points for quest milestones).
        """
        if not self._terminated:
            command = " ".join(action.split()).encode()[:_MAX_ACTION_BYTES].decode(errors="ignore")
            if is_chained(command):
                self.observation, reward = CHAINED_REFUSAL, 0.0
            else:
                state, score, _ = self._env.step(command)
                reward, self._score = float(score) - self._score, float(score)
                self._absorb(state)
        else:
            reward = 0.0
        plan = self._plan
        return StepResult(observation=self.observation, admissible_actions=self.admissible_actions,
                          reward=reward, terminated=self._terminated, won=self._won,
                          oracle_plan_length=None if plan is None else len(plan))

    def oracle_plan(self) -> list[str] | None:
        """TextWorld's ``policy_commands`` from here: [] once won, None when no winning plan is left."""
        return None if self._plan is None else list(self._plan)

    def close(self) -> None:
        """Close the game interpreter."""
        self._env.close()


class TextWorldFamily(TaskFamily):
    """Adapter from TextWorld's ``tw-make custom`` games to the task-family contract.

    Args:
        cache_dir: Directory of compiled games (``<key>.z8`` + ``<key>.json``); created if missing.
        generation_timeout_s: Wall-clock limit of one ``tw-make`` run, in seconds (3–9 s is usual).
    """

    name = "textworld"
    library = "textworld"
    knobs = (
        Knob("world_size", 1, 8, 1, description="rooms in the world"),
        Knob("nb_objects", 1, 12, 1, description="minimum number of objects (the quest may add more)"),
        Knob("quest_length", 1, 8, 1, description="actions the quest requires"),
    )
    max_steps = 40
    BAD_STEP_THRESHOLD = 0.5
    """A bad-step share at or above this means the agent mostly wanders (see `knob_preference`)."""

    def __init__(self, cache_dir: str | Path, *, generation_timeout_s: float = 300.0) -> None:
        self.cache_dir = Path(cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.generation_timeout_s = generation_timeout_s

    def validate(self, spec: TaskSpec) -> None:
        """Check family, knob names and bounds (base rules), and that every knob is an integer.

        Raises:
            InvalidArgumentError: any rule broken; the message names the knob and the value.
        """
        super().validate(spec)
        for knob in self.knobs:
            value = spec.knobs[knob.name]
            if value != int(value):
                raise InvalidArgumentError(f"{self.name}: knob {knob.name}={value:g} must be an integer")

    def game_file(self, spec: TaskSpec) -> Path:
        """Path of the cached ``.z8`` game of ``spec`` (its ``.json`` lies next to it)."""
        return self.cache_dir / f"{spec.key()}.z8"

    def prepare(self, spec: TaskSpec) -> None:
        """Generate and compile the game of ``spec`` unless it is cached (3–9 s; cached: ~0 s).

        ``tw-make`` writes into a private temporary directory; the ``.json`` and then the ``.z8``
        are moved into the cache with atomic renames, so concurrent processes preparing the same
        spec never see a partial game (the loser of the race just overwrites an equal game).

        Raises:
            InvalidArgumentError: bad knobs, or ``tw-make`` failed for these knobs and seed.
            TransientError: ``tw-make`` ran longer than ``generation_timeout_s``.
            RLAnythingError: the ``tw-make`` executable cannot be found.
        """
        self.validate(spec)
        target = self.game_file(spec)
        if target.exists() and target.with_suffix(".json").exists():
            return
        tw_make = Path(sys.executable).with_name("tw-make")
        # the script beside the interpreter is run by the interpreter: its "#!" line names the virtualenv's
        # python by path, which the kernel cuts at the first space (a checkout under "/tmp/my runs/")
        found = shutil.which("tw-make")
        launcher = [sys.executable, str(tw_make)] if tw_make.exists() else [found] if found else None
        if launcher is None:
            raise RLAnythingError("tw-make not found next to the Python interpreter nor on PATH")
        k = {name: int(v) for name, v in spec.knobs.items()}
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{spec.key()}-", dir=self.cache_dir))
        try:
            cmd = [*launcher, "custom", "--world-size", str(k["world_size"]), "--nb-objects", str(k["nb_objects"]),
                   "--quest-length", str(k["quest_length"]), "--seed", str(spec.seed),
                   "--output", str(tmp / "game.z8"), "--silent"]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=self.generation_timeout_s,
                                      check=False)
            except subprocess.TimeoutExpired as exc:
                raise TransientError(
                    f"tw-make for {spec.key()} took over {self.generation_timeout_s:g} s") from exc
            if done.returncode != 0 or not (tmp / "game.z8").exists():
                tail = (done.stderr or done.stdout).strip()[-500:]
                raise InvalidArgumentError(f"tw-make failed for {spec.key()} (exit {done.returncode}): {tail}")
            os.replace(tmp / "game.json", target.with_suffix(".json"))
            os.replace(tmp / "game.z8", target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def instance_key(self, spec: TaskSpec) -> str:
        """``textworld:`` and the game's `game_identity` (preparing it first): small worlds with a
        short quest repeat across seeds.

        Raises:
            InvalidArgumentError, TransientError, RLAnythingError: as `prepare`.
        """
        self.prepare(spec)
        return f"{self.name}:{game_identity(json.loads(self.game_file(spec).with_suffix('.json').read_text()))}"

    def make_episode(self, spec: TaskSpec, episode_seed: int) -> TextWorldEpisode:
        """Start a play-through of ``spec`` (preparing it first if needed); ``episode_seed`` is unused.

        Raises:
            InvalidArgumentError, TransientError, RLAnythingError: as `prepare`.
        """
        self.prepare(spec)
        return TextWorldEpisode(self.game_file(spec))

    def oracle_plan_length(self, spec: TaskSpec) -> int | None:
        """Length of TextWorld's walkthrough (``policy_commands`` at the start, Côté et al. 2018).

        Returns None when the generated game has no winning plan.
        """
        return super().oracle_plan_length(spec)

    def knob_preference(self, harder: bool, bad_step_share: float) -> list[str]:
        """Order the knobs by the kind of mistakes the agent makes (the RM's bad-step share).

        Rule, with ``many = bad_step_share >= BAD_STEP_THRESHOLD`` (0.5):

        - easier, many bad steps: the agent gets lost, so shrink the map first:
          world_size, nb_objects, quest_length.
        - easier, few bad steps: its steps are fine but the plan is too long to finish:
          quest_length, world_size, nb_objects.
        - harder, few bad steps: it executes plans cleanly, so ask for longer ones:
          quest_length, world_size, nb_objects.
        - harder, many bad steps: keep the plan length and add distractors first:
          nb_objects, world_size, quest_length.

        Raises:
            InvalidArgumentError: ``bad_step_share`` outside [0, 1].
        """
        if not 0.0 <= bad_step_share <= 1.0:
            raise InvalidArgumentError(f"bad_step_share={bad_step_share:g} outside [0, 1]")
        many = bad_step_share >= self.BAD_STEP_THRESHOLD
        return list(_KNOB_ORDER[(harder, many)])
