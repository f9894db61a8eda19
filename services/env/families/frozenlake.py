"""Family `gym_text` (its config name): Gymnasium toy-text FrozenLake rendered as text, with a shortest-path oracle.

The map comes from Gymnasium's own generator (`generate_random_map`, which only returns maps
with a path from S to G) and the dynamics from `FrozenLake-v1`. Knobs: ``size`` (the map is
size×size), ``hole_prob`` (chance that a tile is a hole) and ``slip`` (optional, default 0:
deterministic): the chance that a move goes to one of the two perpendicular directions instead,
Gymnasium's ``is_slippery`` with ``success_rate = 1 − slip``, and ``head_start`` (optional,
default 0): the agent starts that many tiles along the shortest path (at least one step left).
Both are `Knob.same_task` knobs: a variant with more slip or less head start is the same map,
harder by the knob alone and by a small step, where a
new map of another size or hole density lands far from its parent for a near-deterministic
policy (measured: 4×4 → 5×5 took candidates from acc 0.88 to 0.13). The observation is one of two views (``FamilyConfig.observation``):

* ``map``: the whole map, one row per line, the agent's tile shown as ``A``;
* ``window``: the 5×5 tiles around the agent (``#`` off the map) plus the goal's offset
  ("goal: 2 down, 1 right"). Its text does not grow with the map, and a tiny model reads the
  next move off the tiles next to ``A`` (measured in the README: held-out success rises under RL
  with this view and stays flat with ``map``).

The oracle is a breadth-first search on the map: the shortest action list to
the goal that avoids holes. This is the fast family for CI (~50 µs per step).
"""

from __future__ import annotations

from collections import deque

import gymnasium as gym
from gymnasium.envs.toy_text.frozen_lake import generate_random_map

from services.env.families.base import Episode, Knob, StepResult, TaskFamily, TaskSpec

__all__ = ["FrozenLakeFamily", "shortest_path", "render_map", "render_window", "goal_offset", "VIEWS"]

VIEWS: tuple[str, ...] = ("map", "window")

ACTIONS: tuple[str, ...] = ("left", "down", "right", "up")  # FrozenLake's action ids 0..3
_MOVES = {0: (0, -1), 1: (1, 0), 2: (0, 1), 3: (-1, 0)}


def shortest_path(desc: list[str], row: int, col: int) -> list[str] | None:
    """Shortest action list from (row, col) to 'G' avoiding 'H' tiles (BFS); None if unreachable.

    Moves into a wall leave the agent in place, as in FrozenLake, so they never appear in a plan.
    """
    n_rows, n_cols = len(desc), len(desc[0])
    if desc[row][col] == "G":
        return []
    previous: dict[tuple[int, int], tuple[tuple[int, int], int]] = {}
    queue = deque([(row, col)])
    seen = {(row, col)}
    while queue:
        r, c = queue.popleft()
        for action, (dr, dc) in _MOVES.items():
            nr, nc = r + dr, c + dc
            if not (0 <= nr < n_rows and 0 <= nc < n_cols) or (nr, nc) in seen or desc[nr][nc] == "H":
                continue
            seen.add((nr, nc))
            previous[(nr, nc)] = ((r, c), action)
            if desc[nr][nc] == "G":
                plan: list[str] = []
                cell = (nr, nc)
                while cell != (row, col):
                    cell, a = previous[cell]
                    plan.append(ACTIONS[a])
                return plan[::-1]
            queue.append((nr, nc))
    return None


def _direction(before: tuple[int, int], after: tuple[int, int]) -> str:
    """The action name of a one-tile move from ``before`` to ``after`` (row, col); '' for none."""
    delta = (after[0] - before[0], after[1] - before[1])
    return next((ACTIONS[a] for a, d in _MOVES.items() if d == delta), "")


def render_map(desc: list[str], row: int, col: int) -> str:
    """The map as text, one row per line, with the agent's tile shown as 'A'."""
    lines = []
    for r, line in enumerate(desc):
        cells = ["A" if (r, c) == (row, col) else ch for c, ch in enumerate(line)]
        lines.append(" ".join(cells))
    return "\n".join(lines)


def render_window(desc: list[str], row: int, col: int, radius: int = 2) -> str:
    """The (2·radius+1)² tiles around (row, col) as text, the agent as 'A', '#' off the map."""
    n_rows, n_cols = len(desc), len(desc[0])
    lines = []
    for r in range(row - radius, row + radius + 1):
        cells = []
        for c in range(col - radius, col + radius + 1):
            if (r, c) == (row, col):
                cells.append("A")
            elif 0 <= r < n_rows and 0 <= c < n_cols:
                cells.append(desc[r][c])
            else:
                cells.append("#")
        lines.append(" ".join(cells))
    return "\n".join(lines)


def goal_offset(desc: list[str], row: int, col: int) -> str:
    """Where 'G' lies from (row, col), e.g. "2 down, 1 right" ("here" on the goal).

    Raises:
        ValueError: the map has no 'G'.
    """
    for r, line in enumerate(desc):
        c = line.find("G")
        if c >= 0:
            break
    else:
        raise ValueError("map has no goal tile 'G'")
    parts = []
    if r != row:
        parts.append(f"{abs(r - row)} {'down' if r > row else 'up'}")
    if c != col:
        parts.append(f"{abs(c - col)} {'right' if c > col else 'left'}")
    return ", ".join(parts) or "here"


class FrozenLakeEpisode(Episode):
    """One FrozenLake episode driven through `gymnasium.make("FrozenLake-v1", ...)`.

    ``view`` is ``map`` (the whole map) or ``window`` (5×5 around the agent + the goal's offset).
    """

    def __init__(self, desc: list[str], episode_seed: int, view: str = "map", slip: float = 0.0,
                 head_start: int = 0) -> None:
        if view not in VIEWS:
            raise ValueError(f"view must be one of {VIEWS}, got {view!r}")
        if not 0.0 <= slip < 1.0:
            raise ValueError(f"slip must be in [0, 1), got {slip}")
        self.view = view
        self.desc = desc
        self.env = (gym.make("FrozenLake-v1", desc=desc, is_slippery=True, success_rate=1.0 - slip) if slip > 0
                    else gym.make("FrozenLake-v1", desc=desc, is_slippery=False))
        state, _ = self.env.reset(seed=episode_seed)
        self.state = int(state)
        self.n = len(desc[0])
        if head_start > 0:  # start k tiles along the shortest path (at least one step left)
            row, col = divmod(self.state, self.n)
            for action in (shortest_path(desc, row, col) or [])[:-1][:head_start]:
                dr, dc = _MOVES[ACTIONS.index(action)]
                row, col = row + dr, col + dc
            self.state = row * self.n + col
            self.env.unwrapped.s = self.state  # type: ignore[attr-defined]  # FrozenLakeEnv keeps its state in s
        self.task_text = (
            "Walk on the frozen lake from S to the goal G without falling into a hole H. "
            "F is frozen ground. A marks where you are. Row 1 is the top row." if view == "map" else
            "Walk on the frozen lake to the goal G without falling into a hole H. F is frozen ground. "
            "You see the tiles around you; A marks where you are and # is off the map.")
        self.admissible_actions = ACTIONS
        self.observation = self._describe("You are at the start.")

    def _describe(self, event: str) -> str:
        row, col = divmod(self.state, self.n)
        if self.view == "window":
            return f"{event}\n{render_window(self.desc, row, col)}\nGoal: {goal_offset(self.desc, row, col)}."
        return f"{event}\n{render_map(self.desc, row, col)}\nYou are at row {row + 1}, column {col + 1}."

    def step(self, action: str) -> StepResult:
        """Move; an action outside ``left/down/right/up`` leaves the agent in place."""
        name = action.strip().lower()
        if name not in ACTIONS:
            self.observation = self._describe(f"Unknown action {action!r}; choose one of {', '.join(ACTIONS)}.")
            return StepResult(self.observation, self.admissible_actions, 0.0, False, False, self._plan_length())
        state, reward, terminated, _truncated, _info = self.env.step(ACTIONS.index(name))
        moved = int(state) != self.state
        went = _direction(divmod(self.state, self.n), divmod(int(state), self.n))
        self.state = int(state)
        row, col = divmod(self.state, self.n)
        tile = self.desc[row][col]
        won = tile == "G"
        if won:
            event = "You reached the goal!"
        elif tile == "H":
            event = "You fell into a hole."
        else:
            event = (f"You moved {name}." if moved and went == name else
                     f"You slipped: you tried to move {name} and moved {went}." if moved else
                     f"You bumped into the edge moving {name}.")
        self.observation = self._describe(event)
        self.admissible_actions = () if terminated else ACTIONS
        return StepResult(self.observation, self.admissible_actions, float(reward), bool(terminated), won,
                          self._plan_length())

    def _plan_length(self) -> int | None:
        plan = self.oracle_plan()
        return None if plan is None else len(plan)

    def oracle_plan(self) -> list[str] | None:
        """Shortest path to G from the current tile (None after falling into a hole)."""
        row, col = divmod(self.state, self.n)
        if self.desc[row][col] == "H":
            return None
        return shortest_path(self.desc, row, col)

    def close(self) -> None:
        self.env.close()


class FrozenLakeFamily(TaskFamily):
    """FrozenLake maps of configurable size, hole probability and slip (Gymnasium toy-text)."""

    name = "gym_text"
    library = "gymnasium"
    knobs = (
        Knob("size", 3, 8, 1, description="The map is size × size tiles."),
        Knob("hole_prob", 0.0, 0.5, 0.05, integer=False, description="Chance that a tile is a hole."),
        Knob("slip", 0.0, 0.6, 0.1, integer=False, default=0.0, same_task=True,
             description="Chance that a move slips to a perpendicular direction (same map)."),
        Knob("head_start", 0, 8, 1, harder_is_higher=False, default=0, same_task=True,
             description="The agent starts this many tiles along the shortest path (same map)."),
    )
    max_steps = 20

    def __init__(self, view: str = "map") -> None:
        if view not in VIEWS:
            raise ValueError(f"observation must be one of {VIEWS}, got {view!r}")
        self.view = view

    def map_for(self, spec: TaskSpec) -> list[str]:
        """The task's map (rows of S/F/H/G), from Gymnasium's generator seeded by the task seed."""
        self.validate(spec)
        size = int(spec.knobs["size"])
        return list(generate_random_map(size=size, p=1.0 - float(spec.knobs["hole_prob"]), seed=spec.seed))

    def instance_key(self, spec: TaskSpec) -> str:
        """The map's rows, e.g. ``gym_text:SFFF/FHFH/FFFH/HFFG``: two seeds (or two ``hole_prob``
        values) can build the same map, most often on small maps (200 held-out 4×4 slots hold ~150
        distinct maps). ``slip`` and ``head_start`` are left out: they change the dynamics of the
        same map, which is still the same map to remember.

        Raises:
            InvalidArgumentError: knobs out of bounds (`validate`).
        """
        return f"{self.name}:{'/'.join(self.map_for(spec))}"

    def make_episode(self, spec: TaskSpec, episode_seed: int) -> FrozenLakeEpisode:
        """A new episode on the task's map; ``episode_seed`` draws the slips (none at slip 0)."""
        return FrozenLakeEpisode(self.map_for(spec), episode_seed, self.view, float(spec.knobs.get("slip", 0.0)),
                                 int(spec.knobs.get("head_start", 0)))

    def knob_preference(self, harder: bool, bad_step_share: float) -> list[str]:
        """Which knob to move first, from the RM's bad-step share in failed rollouts.

        ``slip`` is not in it: the proposer moves it first only with
        ``env.adaptation.same_task_first`` (`ParametricProposer`). Many bad steps (≥ 0.3) mean the agent walks into holes or away from the goal: the
        holes are the problem, so an easier variant lowers ``hole_prob`` first, and a harder one
        grows ``size`` (longer walks) instead of adding more traps. Few bad steps: the reverse.
        """
        holes_first = ["hole_prob", "size"]
        if harder:
            return holes_first[::-1] if bad_step_share >= 0.3 else holes_first
        return holes_first if bad_step_share >= 0.3 else holes_first[::-1]
