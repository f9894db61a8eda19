"""Start-up checks and commands of a trainer on several torchrun ranks (the collectives themselves run
in tests/integration/policy/test_sharded_trainer.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from services.common.data_parallel import join_process_group, launched_world
from services.common.errors import ConfigError
from services.common.rank_group import Command, heartbeat_interval, require_trainer_role, run_command


def test_only_a_trainer_of_local_weights_may_run_on_several_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    require_trainer_role("policy", "all")  # one process: any role
    monkeypatch.setenv("WORLD_SIZE", "2")
    require_trainer_role("policy", "trainer")
    with pytest.raises(ConfigError, match=r"policy.role must be 'trainer' under torchrun \(WORLD_SIZE=2\).*'rollout'"):
        require_trainer_role("policy", "rollout")
    with pytest.raises(ConfigError, match="reward: a trainer without local weights"):
        require_trainer_role("reward", "trainer", trains_weights=False)


@pytest.mark.parametrize("value", ["0", "two", "-1", ""])
def test_a_bad_world_size_is_named(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("WORLD_SIZE", value)
    with pytest.raises(ValueError, match=f"WORLD_SIZE must be a positive integer.*{value!r}"):
        launched_world()


def test_without_torchrun_a_trainer_is_rank_0_of_1_and_joins_no_group(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch.distributed as dist

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    shard = join_process_group(5.0)
    assert (shard.rank, shard.world) == (0, 1) and not dist.is_initialized()


def test_heartbeats_come_well_inside_the_collective_timeout() -> None:
    assert heartbeat_interval(1800) == 60.0
    assert heartbeat_interval(20) == 5.0


def test_a_stop_is_not_a_command_a_rank_carries_out() -> None:
    with pytest.raises(ValueError, match="no action for a 'stop' command"):
        run_command(None, Command("stop"))  # type: ignore[arg-type]  # never reaches the learner
    assert run_command(None, Command("beat")) == ({}, "")  # type: ignore[arg-type]


def test_a_rollout_worker_started_by_torchrun_fails_at_start_up_with_the_reason(tmp_path) -> None:
    config = tmp_path / "policy.yaml"
    config.write_text("policy: {role: all, model: {source: tiny}}\n")
    done = subprocess.run([sys.executable, "-m", "services.policy", "--config", str(config)], capture_output=True,
                          text=True, timeout=120, env={"WORLD_SIZE": "2", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2, done.stderr[-2000:]
    assert "config error: policy.role must be 'trainer' under torchrun (WORLD_SIZE=2)" in done.stderr
