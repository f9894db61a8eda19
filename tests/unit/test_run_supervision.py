"""The launcher's restart policy (`services.run.supervision`, pure) and the round counts that a
restart must not change (`services.run.progress`)."""

from __future__ import annotations

from rlanything.v1.events_pb2 import MODEL_ROLE_POLICY, MODEL_ROLE_REWARD_MODEL, ModelVersion
from services.common.config.launcher import RestartConfig
from services.run.progress import RunProgress
from services.run.supervision import HealthWatch, RestartBook, restart_delay_s


def test_back_off_doubles_up_to_its_cap() -> None:
    assert [restart_delay_s(n, 1.0, 5.0) for n in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_a_process_restarts_after_its_back_off_until_its_budget_is_spent() -> None:
    book = RestartBook(RestartConfig(max_restarts=2, backoff_s=1.0, backoff_max_s=30.0))
    assert book.exited("critic", -9, now_s=100.0) == 101.0
    assert book.exited("critic", -9, now_s=100.5) == 101.0  # asked again while waiting: same moment
    first = book.restarted("critic", now_s=101.0)
    assert (first.name, first.exit_code, first.exited_s, first.number) == ("critic", -9, 100.0, 1)
    assert book.exited("critic", 1, now_s=200.0) == 202.0  # second restart waits twice as long
    book.restarted("critic", now_s=202.0)
    assert book.exited("critic", 1, now_s=300.0) is None  # budget of 2 spent
    assert book.exited("env", -9, now_s=300.0) == 301.0  # each process has its own budget
    assert [r.number for r in book.restarts] == [1, 2]


def test_no_restart_when_disabled() -> None:
    assert RestartBook(RestartConfig(enabled=False)).exited("env", -9, now_s=0.0) is None


def test_a_restart_keeps_why_the_launcher_stopped_the_process() -> None:
    book = RestartBook(RestartConfig(backoff_s=1.0))
    book.exited("env", -9, now_s=10.0, cause="no health answer for 31.0 s (launcher.restart.unresponsive_s=30)")
    restart = book.restarted("env", now_s=11.0)
    assert restart.cause.startswith("no health answer for 31.0 s") and restart.exit_code == -9


def test_a_process_is_frozen_after_no_health_answer_for_its_bound() -> None:
    watch = HealthWatch(unresponsive_s=30.0, start_grace_s=60.0, started_s=0.0)
    assert watch.frozen(now_s=59.0) is None  # still starting (loading, connecting)
    assert watch.frozen(now_s=61.0) == "no health answer 61.0 s after its start (launcher.health_timeout_s=60)"
    watch.answered(now_s=10.0)  # SERVING or NOT_SERVING: alive either way
    assert watch.frozen(now_s=40.0) is None
    assert watch.frozen(now_s=40.5) == "no health answer for 30.5 s (launcher.restart.unresponsive_s=30)"
    watch.answered(now_s=41.0)
    assert watch.frozen(now_s=70.0) is None


def _version(role: int, version: int, round_: int, batches: float) -> ModelVersion:
    v = ModelVersion(role=role, version=version, trained_on_round=round_, uri="x")
    v.metrics["batches"] = batches
    return v


def test_counts_come_from_ids_and_trained_batches_and_a_replay_counts_once() -> None:
    progress = RunProgress()
    ids = [f"r0/job-{j}/{i}" for j in range(3) for i in range(4)]
    for _ in range(2):  # the whole history twice (a redelivery, a replay after a restart)
        for msg_id in ids:
            progress.on_id("trajectories", msg_id)
            progress.on_id("judged", msg_id)
        progress.on_version(_version(MODEL_ROLE_POLICY, 1, 0, 3.0))
        progress.on_version(_version(MODEL_ROLE_REWARD_MODEL, 1, 0, 3.0))
    progress.on_id("policy_batches", "r0/job-0")  # seen live: one of three (the others before a restart)
    progress.on_restart("critic", 0)
    record = progress.round(0).record(accepted_total=0.0, wall_s=10.0)
    assert record["counts/jobs"] == 3.0
    assert record["counts/trajectories"] == 12.0 and record["counts/judged"] == 12.0
    assert record["counts/policy_batches"] == 3.0 and record["counts/reward_batches"] == 3.0
    assert record["launcher/restarts"] == 1.0
    assert progress.restarts == {"critic": 1}


def test_the_report_says_which_rounds_had_restarts() -> None:
    from services.run.report import restarts_line

    assert restarts_line([{"round": 0.0, "launcher/restarts": 0.0}]) == "No process was restarted during the run."
    line = restarts_line([{"round": 0.0}, {"round": 1.0, "launcher/restarts": 2.0}, {"round": 2.0, "launcher/restarts": 1.0}])
    assert line.startswith("The launcher restarted 3 processes (2 in round 1, 1 in round 2)")


def test_a_round_is_not_complete_while_its_judgements_are_still_being_read() -> None:
    """Found by the asynchronous chaos test: a round recorded as soon as the critic closed its
    groups showed 27 judged of 28 trajectories — the last judgement was not read yet."""
    progress = RunProgress()
    rp = progress.round(0)
    rp.metrics = {"critic/jobs_in_round": 1.0, "critic/groups_complete": 1.0, "critic/trajectories": 2.0}
    for msg_id in ("r0/job-0/0", "r0/job-0/1"):
        progress.on_id("trajectories", msg_id)
    progress.on_id("judged", "r0/job-0/0")
    assert not rp.complete("async")
    progress.on_id("judged", "r0/job-0/1")
    assert rp.complete("async")


def test_the_envs_release_counts_reach_the_rounds_record() -> None:
    from rlanything.v1.events_pb2 import RoundMetrics

    progress = RunProgress()
    progress.on_env_metrics(RoundMetrics(round=2, values={"eval/overlap": 0.0, "env/train_instances": 96.0,
                                                          "env/redrawn_instances": 41.0}))
    progress.on_env_metrics(RoundMetrics(round=2, values={"eval/overlap": 0.0, "env/train_instances": 96.0,
                                                          "env/redrawn_instances": 41.0}))  # a replay: the same
    record = progress.round(2).record(accepted_total=0.0, wall_s=1.0)
    assert (record["eval/overlap"], record["env/train_instances"], record["env/redrawn_instances"]) == (0.0, 96.0, 41.0)
    assert "eval/overlap" not in progress.round(3).record(accepted_total=0.0, wall_s=1.0)


def test_the_budget_and_the_back_off_count_only_restarts_within_the_window() -> None:
    """Two broker outages an hour apart: each gets the whole budget and a fresh back-off (the budget over
    the whole run once let a second outage end the run)."""
    book = RestartBook(RestartConfig(max_restarts=2, backoff_s=1.0, restart_window_s=600.0))
    for t in (100.0, 110.0):  # the first outage spends the budget
        at = book.exited("critic", 69, now_s=t)
        assert at is not None
        book.restarted("critic", now_s=at)
    assert book.exited("critic", 69, now_s=500.0) is None  # a third exit inside the window stops the run
    book = RestartBook(RestartConfig(max_restarts=2, backoff_s=1.0, restart_window_s=600.0))
    for t in (100.0, 110.0):
        book.restarted("critic", now_s=book.exited("critic", 69, now_s=t))
    assert book.exited("critic", 69, now_s=3700.0) == 3701.0  # an hour later: budget and back-off anew
    again = book.restarted("critic", now_s=3701.0)
    assert (again.number, again.recent) == (3, 1)
    whole_run = RestartBook(RestartConfig(max_restarts=2, restart_window_s=0))
    for t in (100.0, 110.0):
        whole_run.restarted("critic", now_s=whole_run.exited("critic", 69, now_s=t))
    assert whole_run.exited("critic", 69, now_s=3700.0) is None  # 0: the whole run, as before
