"""`type: remote`: the env service plays the tasks of your own Environment server (here the
template `examples/env_server.py` on loopback), keeping the server's per-step oracle labels."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlanything.v1.events_pb2 import STEP_LABEL_BAD, STEP_LABEL_GOOD, TaskRef
from services.common.errors import InvalidArgumentError
from services.env.families.base import TaskSpec
from services.env.families.remote import RemoteFamily
from services.env.sessions import SessionStore
from services.env.stepping import reset_episode, step_episode

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def example_address() -> Iterator[str]:
    spec = importlib.util.spec_from_file_location("env_server_example", ROOT / "examples" / "env_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    server = module.serve(0)
    yield f"127.0.0.1:{server.port}"
    server.stop(None)


def test_tasks_map_onto_the_servers_and_steps_keep_its_labels(example_address: str) -> None:
    family = RemoteFamily(example_address)
    assert [t.ref.slot_id for t in family.tasks] == ["count/heldout-0"] + [f"count/train-{i}" for i in range(4)]
    episode = family.make_episode(TaskSpec("remote", {}, 7), 0)  # seed 7 → the server's task 7 mod 5 = 2
    assert episode.observation.startswith("The number is ") and episode.admissible_actions == ("+1", "-1")
    value, target = (int(w.strip(".;")) for w in episode.observation.split() if w.strip(".;").isdigit())
    if value == target:
        pytest.skip("this seed starts on the target")
    right, wrong = ("+1", "-1") if value < target else ("-1", "+1")
    assert episode.step(wrong).oracle_label == STEP_LABEL_BAD
    assert episode.step(right).oracle_label == STEP_LABEL_GOOD
    assert family.oracle_plan_length(TaskSpec("remote", {}, 7)) == 0
    episode.close()
    episode.close()  # a second Close of a session the server forgot changes nothing


async def test_the_env_session_layer_reports_the_servers_labels(example_address: str) -> None:
    family = RemoteFamily(example_address)
    sessions = SessionStore(idle_timeout_s=60, max_sessions=8)
    reset = await reset_episode(sessions, TaskRef(slot_id="remote/train-0000", family="remote"), family,
                                TaskSpec("remote", {}, 3), 1)
    labels = set()
    for _ in range(4):
        step = await step_episode(sessions.get(reset.session_id), "+1")
        labels.add(step.oracle_label)
        if step.terminated or step.truncated:
            break
    assert labels <= {STEP_LABEL_GOOD, STEP_LABEL_BAD} and labels


def test_an_address_without_a_server_fails_at_start_naming_it() -> None:
    with pytest.raises(InvalidArgumentError, match="the Environment server at 127.0.0.1:9 did not answer ListTasks"):
        RemoteFamily("127.0.0.1:9", timeout_s=2)


def test_a_run_config_with_a_remote_family_needs_an_address() -> None:
    from services.common.config import FamilyConfig

    with pytest.raises(ValueError, match="type remote needs address"):
        FamilyConfig(type="remote", knobs={})
