"""Any text-renderable Gymnasium environment as a task family, by its id (``type: gymnasium``).

``env_id`` names a registered Gymnasium environment with a discrete action space, e.g.
``Taxi-v4``, ``CliffWalking-v1``, ``FrozenLake-v1`` or ``Blackjack-v1``. The observation is the
environment's ``ansi`` rendering (colour codes removed) when it has one, else its observation
value as text; the admissible actions are the action names for the toy-text environments
Gymnasium documents, else the action indices. A task is the environment with a reset seed: the
task seed and the episode seed together seed ``env.reset`` (same task and seed, same episode).

What the loop does without what a hand-written family adds: there are no difficulty knobs, so
the environment loop requests variants but the proposer makes none (the pool's tasks stay the
seed tasks); there is no oracle, so steps carry no oracle label (a winning step excepted) and
the RM's step accuracy is not measured. Winning is ``won_when``: ``positive_reward`` (the final
step's reward > 0: Taxi, Blackjack, FrozenLake) or ``terminated`` (any end inside the
environment: CliffWalking, whose only end is the goal).
"""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym

from services.common.errors import InvalidArgumentError
from services.env.families.base import Episode, StepResult, TaskFamily, TaskSpec

__all__ = ["GymnasiumFamily", "ACTION_NAMES"]

ACTION_NAMES: dict[str, tuple[str, ...]] = {
    "Taxi": ("south", "north", "east", "west", "pickup", "dropoff"),
    "CliffWalking": ("up", "right", "down", "left"),
    "FrozenLake": ("left", "down", "right", "up"),
    "Blackjack": ("stick", "hit"),
}
"""Action meanings from Gymnasium's documentation, by environment name (the id without -vN)."""
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class GymnasiumEpisode(Episode):
    """One episode of a Gymnasium environment."""

    def __init__(self, env: Any, seed: int, actions: tuple[str, ...], won_when: str, task_text: str) -> None:
        self.env = env
        self.actions = actions
        self.won_when = won_when
        self.task_text = task_text
        obs, _info = env.reset(seed=seed)
        self.admissible_actions = actions
        self.observation = self._render(obs, "The episode starts.")

    def _render(self, obs: Any, event: str) -> str:
        text = self.env.render() if self.env.render_mode == "ansi" else None
        shown = _ANSI.sub("", text).rstrip() if isinstance(text, str) else f"Observation: {obs}"
        return f"{event}\n{shown}"

    def step(self, action: str) -> StepResult:
        """Take the action named (or numbered) ``action``; anything else changes nothing."""
        name = action.strip().lower()
        index = self.actions.index(name) if name in self.actions else int(name) if name.isdigit() else -1
        if not 0 <= index < len(self.actions):
            self.observation = self._render(None, f"Unknown action {action!r}; choose one of {', '.join(self.actions)}.")
            return StepResult(self.observation, self.admissible_actions, 0.0, False, False, None)
        obs, reward, terminated, _truncated, _info = self.env.step(index)
        won = bool(terminated) and (reward > 0 if self.won_when == "positive_reward" else True)
        self.observation = self._render(obs, f"You chose {self.actions[index]} (reward {float(reward):g}).")
        self.admissible_actions = () if terminated else self.actions
        return StepResult(self.observation, self.admissible_actions, float(reward), bool(terminated), won, None)

    def oracle_plan(self) -> list[str] | None:
        """No oracle for an arbitrary environment."""
        return None

    def close(self) -> None:
        self.env.close()


class GymnasiumFamily(TaskFamily):
    """Tasks of one Gymnasium environment id; no knobs, no oracle (see the module docstring).

    Raises:
        InvalidArgumentError: the id is not registered, or its action space is not discrete.
    """

    name = "gymnasium"
    library = "gymnasium"
    knobs = ()
    max_steps = 30

    def __init__(self, env_id: str, won_when: str = "positive_reward") -> None:
        if env_id not in gym.registry:
            raise InvalidArgumentError(f"env_id {env_id!r} is not a registered Gymnasium environment")
        self.env_id = env_id
        self.won_when = won_when
        probe = self._make()
        if not isinstance(probe.action_space, gym.spaces.Discrete):
            raise InvalidArgumentError(f"env_id {env_id!r} has action space {probe.action_space}; a discrete one is needed")
        n = int(probe.action_space.n)
        probe.close()
        names = ACTION_NAMES.get(env_id.split("-v")[0], ())
        self.actions = names if len(names) == n else tuple(str(i) for i in range(n))
        if probe.spec is not None and probe.spec.max_episode_steps:
            self.max_steps = int(probe.spec.max_episode_steps)

    def _make(self) -> Any:
        env = gym.make(self.env_id)
        if "ansi" in env.metadata.get("render_modes", []):
            env.close()
            env = gym.make(self.env_id, render_mode="ansi")
        return env

    def make_episode(self, spec: TaskSpec, episode_seed: int) -> GymnasiumEpisode:
        self.validate(spec)
        seed = (spec.seed * 1_000_003 + episode_seed) % (2**31 - 1)
        return GymnasiumEpisode(self._make(), seed, self.actions, self.won_when,
                                f"Play {self.env_id} and win. Actions: {', '.join(self.actions)}.")

    def oracle_plan_length(self, spec: TaskSpec) -> int | None:
        """0: unknown (no oracle), which accepts every task and candidate."""
        self.validate(spec)
        return 0
