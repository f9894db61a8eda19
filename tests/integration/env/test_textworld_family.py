"""The ``textworld`` family against real games compiled by ``tw-make`` (TextWorld 1.7).

Each game is generated once per module (module-scoped cache); the seeds are pinned because the
assertions use the games' actual walkthroughs:
- base (world_size 2, nb_objects 3, quest_length 2, seed 2): take latchkey from basket, unlock box;
- harder (quest_length 3, same seed): go east, then the same two steps.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest

from services.common.errors import InvalidArgumentError
from services.env.families.base import TaskSpec
from services.env.families.textworld_family import TextWorldFamily, clean_feedback

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BASE = TaskSpec("textworld", {"world_size": 2.0, "nb_objects": 3.0, "quest_length": 2.0}, seed=2)


@pytest.fixture(scope="module")
def family(tmp_path_factory: pytest.TempPathFactory) -> TextWorldFamily:
    """A family whose game cache lives for the whole module."""
    return TextWorldFamily(tmp_path_factory.mktemp("tw-cache"))


@pytest.fixture(scope="module")
def harder(family: TextWorldFamily) -> TaskSpec:
    knobs = family.move_knob(BASE.knobs, "quest_length", harder=True)
    assert knobs == {"world_size": 2.0, "nb_objects": 3.0, "quest_length": 3.0}
    return TaskSpec("textworld", knobs, BASE.seed)


def test_walkthrough_wins_and_every_step_shortens_the_plan(family: TextWorldFamily) -> None:
    episode = family.make_episode(BASE, episode_seed=0)
    try:
        plan = episode.oracle_plan()
        assert plan == ["take latchkey from basket", "unlock box with latchkey"]
        assert episode.task_text.startswith(("Welcome", "Hey", "It's", "You are", "Who"))
        assert "$$" not in episode.observation and episode.observation
        assert episode.admissible_actions == tuple(sorted(episode.admissible_actions))
        assert plan[0] in episode.admissible_actions
        before, total_reward = len(plan), 0.0
        for i, action in enumerate(plan):
            result = episode.step(action)
            total_reward += result.reward
            assert result.oracle_plan_length is not None and result.oracle_plan_length < before  # a good step
            before = result.oracle_plan_length
            assert result.terminated == result.won == (i == len(plan) - 1)
        assert result.won and result.oracle_plan_length == 0 and episode.oracle_plan() == []
        assert total_reward >= 1.0 and result.admissible_actions == ()
        again = episode.step("look")  # after the end: the final state again, no reward
        assert again.terminated and again.won and again.reward == 0.0
    finally:
        episode.close()


def test_dropping_the_taken_object_does_not_shorten_the_plan(family: TextWorldFamily) -> None:
    episode = family.make_episode(BASE, episode_seed=0)
    try:
        take = episode.oracle_plan()[0]
        obj = re.fullmatch(r"take (.+?)(?: from .+)?", take).group(1)
        before = episode.step(take).oracle_plan_length
        assert before == 1 and f"drop {obj}" in episode.admissible_actions
        after = episode.step(f"drop {obj}").oracle_plan_length
        assert after is not None and after >= before  # a bad step: progress undone
        assert after == 2
    finally:
        episode.close()


def test_going_back_through_the_door_does_not_shorten_the_plan(family: TextWorldFamily, harder: TaskSpec) -> None:
    episode = family.make_episode(harder, episode_seed=0)
    try:
        assert episode.oracle_plan()[0] == "go east"
        before = episode.step("go east").oracle_plan_length
        assert before == 2
        after = episode.step("go west").oracle_plan_length
        assert after is not None and after >= before and after == 3
    finally:
        episode.close()


def test_nonsense_and_inadmissible_actions_change_nothing(family: TextWorldFamily) -> None:
    episode = family.make_episode(BASE, episode_seed=0)
    try:
        start = len(episode.oracle_plan())
        for action in ["xyzzy plugh", "", "go\nnowhere", "eat the moon", "ü" * 500]:
            result = episode.step(action)
            assert not result.terminated and result.reward == 0.0
            assert result.oracle_plan_length == start and result.observation
    finally:
        episode.close()


def test_harder_quest_length_has_a_longer_oracle_plan(family: TextWorldFamily, harder: TaskSpec) -> None:
    assert family.oracle_plan_length(BASE) == 2
    assert family.oracle_plan_length(harder) == 3


def test_prepare_is_cached_and_safe_under_a_race(tmp_path: Path) -> None:
    fam = TextWorldFamily(tmp_path)
    errors: list[BaseException] = []

    def prepare() -> None:
        try:
            fam.prepare(BASE)
        except BaseException as exc:  # noqa: BLE001 - reported by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=prepare) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    game = fam.game_file(BASE)
    assert sorted(p.name for p in tmp_path.iterdir()) == [game.with_suffix(".json").name, game.name]
    mtime_ns = game.stat().st_mtime_ns
    start = time.perf_counter()
    fam.prepare(BASE)
    assert time.perf_counter() - start < 0.5
    assert game.stat().st_mtime_ns == mtime_ns
    assert fam.oracle_plan_length(BASE) == 2


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"world_size": 9.0, "nb_objects": 3.0, "quest_length": 2.0}, "world_size=9 outside [1, 8]"),
        ({"world_size": 2.0, "nb_objects": 2.5, "quest_length": 2.0}, "nb_objects=2.5 must be an integer"),
        ({"world_size": 2.0, "nb_objects": 3.0, "quest_length": 0.0}, "quest_length=0 outside [1, 8]"),
        ({"world_size": 2.0, "nb_objects": 3.0}, "knob 'quest_length' is missing"),
    ],
)
def test_invalid_knobs_raise(tmp_path: Path, knobs: dict[str, float], message: str) -> None:
    fam = TextWorldFamily(tmp_path)
    spec = TaskSpec("textworld", knobs, seed=1)
    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        fam.validate(spec)
    with pytest.raises(InvalidArgumentError):
        fam.prepare(spec)
    assert list(tmp_path.iterdir()) == []


def test_knob_preference_follows_the_bad_step_share(family: TextWorldFamily) -> None:
    assert family.knob_preference(harder=False, bad_step_share=0.8)[0] == "world_size"
    assert family.knob_preference(harder=False, bad_step_share=0.1)[0] == "quest_length"
    assert family.knob_preference(harder=True, bad_step_share=0.1)[0] == "quest_length"
    assert family.knob_preference(harder=True, bad_step_share=0.8)[0] == "nb_objects"
    for harder_ in (False, True):
        assert sorted(family.knob_preference(harder_, 0.5)) == sorted(k.name for k in family.knobs)
    with pytest.raises(InvalidArgumentError):
        family.knob_preference(harder=True, bad_step_share=1.5)


def test_clean_feedback_drops_banner_and_status_bar() -> None:
    raw = "\n\n  ____ \n |  $$\\ \n\nWelcome!\n\n\n\n-= Room =-\nA room.\n\n>      -= Room =-0/1"
    assert clean_feedback(raw) == "Welcome!\n\n-= Room =-\nA room."


@pytest.mark.parametrize("chained", ["take latchkey from basket then unlock box with latchkey",
                                     "take latchkey from basket. unlock box with latchkey",
                                     "take latchkey from basket; unlock box with latchkey",
                                     "take latchkey from basket and then unlock box with latchkey"])
def test_a_chained_command_is_refused_and_changes_nothing(family: TextWorldFamily, chained: str) -> None:
    """Regression (field bugs, 8): TextWorld's parser ran both commands (two silent moves, the
    second against stale admissible actions); one step is one command."""
    episode = family.make_episode(BASE, episode_seed=0)
    try:
        before = (episode.oracle_plan(), episode.admissible_actions)
        result = episode.step(chained)
        assert not result.terminated and result.reward == 0.0
        assert "one command" in result.observation.lower()
        assert (episode.oracle_plan(), result.admissible_actions) == before
        assert result.oracle_plan_length == len(before[0] or [])
        assert episode.step("take latchkey from basket").oracle_plan_length == 1  # the game goes on as before
    finally:
        episode.close()


def test_an_instance_is_named_by_its_game_not_its_seed(family: TextWorldFamily, harder: TaskSpec) -> None:
    key = family.instance_key(BASE)
    assert re.fullmatch(r"textworld:[0-9a-f]{32}", key) and family.instance_key(BASE) == key
    assert family.instance_key(harder) != key  # another quest on the same seed is another game
