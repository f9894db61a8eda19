"""`train_instances: rollout` over gRPC: each rollout of a train task plays its own map, while a
held-out task stays one fixed map."""

from __future__ import annotations

import grpc
import pytest

from rlanything.v1 import env_pb2, env_pb2_grpc
from tests.support import wait_for_tasks

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CONFIG = """
env:
  cache_dir: {cache}
  families:
    - {{type: gym_text, knobs: {{size: 4, hole_prob: 0.2}}, train_slots: 1, heldout_slots: 1,
       train_instances: {instances}}}
  scheduler: {{enabled: false}}
"""


def _maps(address: str, split: str, seeds: range) -> list[str]:
    env = env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(address))
    (task,) = [t for t in wait_for_tasks(env, 2) if t.split == split]
    return [env.Reset(env_pb2.ResetRequest(task=task.ref, seed=s)).observation for s in seeds]


@pytest.mark.parametrize("instances", ["rollout", "task"])
def test_train_rollouts_play_their_own_maps(spawn_service, tmp_path, instances: str) -> None:
    svc = spawn_service("env", CONFIG.format(cache=tmp_path / "cache", instances=instances))
    train = _maps(svc.address, "train", range(8))
    assert _maps(svc.address, "train", range(8)) == train  # the same seed gives the same map again
    if instances == "rollout":
        assert len(set(train)) >= 6  # 8 rollouts: (nearly) all different 4x4 maps
    else:
        assert len(set(train)) == 1  # the paper: every rollout plays the task's one map
    assert len(set(_maps(svc.address, "heldout", range(8)))) == 1  # evaluation keeps one fixed map
