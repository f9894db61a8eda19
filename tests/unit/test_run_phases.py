"""Where a round's wall time goes (`services.run.progress.phase_times`, pure)."""

from __future__ import annotations

import pytest

from services.run.progress import PHASES, RoundProgress, phase_times


def test_overhead_is_wall_time_outside_the_critical_path() -> None:
    record = {"time/generate_s": 6.0, "time/env_s": 1.0, "time/judge_s": 4.0, "policy/time/train_s": 3.0,
              "reward/time/train_s": 2.0, "policy/time/save_s": 0.5, "reward/time/save_s": 0.5}
    out = phase_times(record, {}, wall_s=20.0, started_s=0.0)
    assert out["time/save_s"] == 1.0
    # rollouts (6 + 1) overlap judging (4); the trainers (3 + 0.5 vs 2 + 0.5) run side by side
    assert out["time/critical_path_s"] == pytest.approx(7.0 + 3.5)
    assert out["time/other_s"] == pytest.approx(9.5)
    assert out["time/overhead_share"] == pytest.approx(9.5 / 20.0)
    assert {k for k, _ in PHASES} <= {*record, *out}


def test_overlapping_work_never_gives_negative_overhead() -> None:
    out = phase_times({"time/generate_s": 30.0}, {}, wall_s=20.0, started_s=0.0)
    assert out["time/other_s"] == 0.0 and out["time/overhead_share"] == 0.0


def test_spans_follow_the_event_stamps_in_order() -> None:
    stamps = {"first_job": 101.0, "last_trajectory": 111.0, "last_judged": 112.5, "groups_closed": 113.0,
              "trained_policy": 116.0, "trained_reward": 115.0}
    out = phase_times({}, stamps, wall_s=16.0, started_s=100.0)
    assert out["time/span/wait_s"] == pytest.approx(1.0)
    assert out["time/span/rollout_s"] == pytest.approx(10.0)
    assert out["time/span/judge_tail_s"] == pytest.approx(1.5)
    assert out["time/span/critic_tail_s"] == pytest.approx(0.5)
    assert out["time/span/train_tail_s"] == pytest.approx(3.0)


def test_round_progress_keeps_first_and_latest_stamps() -> None:
    rp = RoundProgress(0)
    rp.stamp("first_job", first=True)
    first = rp.stamps["first_job"]
    rp.stamp("first_job", first=True)
    assert rp.stamps["first_job"] == first
    rp.stamp("last_judged")
    later = rp.stamps["last_judged"]
    rp.stamp("last_judged")
    assert rp.stamps["last_judged"] >= later
