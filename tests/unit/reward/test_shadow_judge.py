"""Shadow mode of the reward service (pure parts): where a shadow's votes go, and the config rules
that keep a shadow from training."""

from __future__ import annotations

import pytest

from rlanything.v1.events_pb2 import Trajectory
from services.common.config import RunConfig, load_config
from services.common.config.reward import RewardServiceConfig
from services.common.errors import ConfigError
from services.common.rounds import judged_id as judged_msg_id
from services.reward.worker import judged_subject


def test_a_shadow_publishes_on_its_own_subjects_and_ids() -> None:
    loop = Trajectory(trajectory_id="r0/gym_text/train-0001/v0/3")
    live = Trajectory(trajectory_id="live-1", source="ingest", tenant="acme", episode_id="ep.1")
    assert judged_subject(loop) == "rla.traj.judged"
    assert judged_subject(loop, "v2") == "rla.traj.shadow.v2"
    assert judged_subject(live) == "rla.traj.live.judged.acme.ep=2E1"
    assert judged_subject(live, "v2") == "rla.traj.live.shadow.acme.ep=2E1.v2"
    assert judged_msg_id(loop.trajectory_id) == "r0/gym_text/train-0001/v0/3/judged"
    assert judged_msg_id(loop.trajectory_id, "v2") == "r0/gym_text/train-0001/v0/3/shadow/v2"


def test_a_shadow_judge_never_trains() -> None:
    with pytest.raises(ValueError, match="reward.shadow='v2' needs reward.role 'judge'"):
        RewardServiceConfig(shadow="v2")  # role 'all' would run the RM trainer
    assert RewardServiceConfig(shadow="v2", role="judge").shadow == "v2"
    with pytest.raises(ValueError, match="shadow"):
        RewardServiceConfig(shadow="no spaces", role="judge")


def test_the_launchers_shadow_judge_is_validated_at_start_up() -> None:
    config = RunConfig.model_validate({"launcher": {"shadow_judge": {"shadow": "oracle", "backend": "oracle",
                                                                     "model": {"threads": 2}}}})
    shadow = config.shadow_reward()
    assert (shadow.role, shadow.backend, shadow.shadow) == ("judge", "oracle", "oracle")
    assert shadow.model.threads == 2 and shadow.model.tiny == config.reward.model.tiny  # merged key by key
    assert shadow.server.grpc_port == 0 and config.reward.role == "all"  # the running judge is untouched
    with pytest.raises(ConfigError, match="shadow_judge needs 'shadow'"):
        load_config(None, ["launcher.shadow_judge={backend: oracle}"])
    with pytest.raises(ConfigError, match="backend"):
        load_config(None, ["launcher.shadow_judge={shadow: x, backend: nope}"])
