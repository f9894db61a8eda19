"""`rlanything run`: cold start, launch NATS and the five services, follow the rounds live,
and write ``runs/<id>/`` (config, metrics.jsonl, report.md, PNG curves)."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import nats
from rich.console import Console
from rich.live import Live
from rich.table import Table

from services.common.bus import server_urls
from services.common.config import RunConfig, dump_config, load_config
from services.common.errors import ServiceFailedError
from services.common.topology import Consumers
from services.run.launcher import Launcher
from services.run.guards import format_collapse
from services.run.monitor import consumer_idle, subscribe_progress
from services.run.progress import RunProgress
from services.run.recorder import record_events
from services.run.report import append_round, read_rounds, summary_table, write_plots, write_report
from services.run.sampling_report import sampling_section
from services.run.trackers import Trackers

__all__ = ["run_loop", "load_for_resume"]

FORMAT_COLLAPSED = 3
"""Exit code of a run stopped by the format-collapse guard (`services.run.guards`)."""
USER_CONFIG = "run-config.yaml"
"""The run's config as given (plus cold-started model paths): what `--resume` restarts from."""
ROUND_SETTLE_S = 30.0
"""After a round's groups closed and its models trained: the longest wait (seconds) for the env to
finish its curriculum decisions about the round's task reports before the round is recorded."""
EVENT_DRAIN_S = 30.0
"""At the end of a run: the longest wait (seconds) for a shadow judge to finish the trajectories
it has not judged yet, and then for the event log to catch up with the streams."""


def load_for_resume(run_dir: Path) -> RunConfig:
    """The config a run was started with.

    Raises:
        ConfigError: ``run_dir`` holds no run-config.yaml.
    """
    return load_config(run_dir / USER_CONFIG)


def _status(config: RunConfig, progress: RunProgress, done: list[dict[str, float]], started: float) -> Table:
    rounds = config.loop.rounds
    current = max(progress.rounds, default=0)
    rp = progress.round(current)
    last = done[-1] if done else {}
    durations = [d["time/round_s"] for d in done if "time/round_s" in d]
    eta = (sum(durations) / len(durations)) * (rounds - len(done)) if durations and rounds else None
    table = Table(show_header=False, box=None)
    table.add_row("round", f"{current} / {rounds - 1 if rounds else '∞'}   phase: [bold]{rp.phase}[/bold]")
    table.add_row("in flight", f"{rp.jobs} tasks, {len(rp.trajectories)}/{rp.expected_trajectories} rollouts, "
                               f"{len(rp.judged)} judged")
    fmt = lambda k: f"{last[k]:.3f}" if k in last else "–"  # noqa: E731
    table.add_row("last round", f"success {fmt('policy/success_train')}  held-out {fmt('policy/success_heldout')}  "
                                f"RM step acc {fmt('reward/step_accuracy')}  in band {fmt('env/in_band_share')}  "
                                f"invalid answers {fmt('policy/invalid_answer_rate')}")
    table.add_row("variants", f"accepted {int(progress.accepted_total)}   versions: policy "
                              f"{progress.versions.get('policy', 0)}, reward {progress.versions.get('reward', 0)}")
    if progress.restarts:
        table.add_row("restarts", ", ".join(f"{name} ×{n}" for name, n in sorted(progress.restarts.items())))
    table.add_row("time", f"{time.monotonic() - started:.0f} s elapsed" + (f", ETA {eta:.0f} s" if eta else ""))
    return table


async def _follow(config: RunConfig, launcher: Launcher, run_dir: Path, console: Console, resume: bool,
                  trackers: Trackers) -> int:
    url = await asyncio.to_thread(launcher.start_nats)
    done = read_rounds(run_dir / "metrics.jsonl")
    progress = RunProgress(first_round=len(done))  # the followers replay the store: a resume sees every round
    nc = await nats.connect(server_urls(url), max_reconnect_attempts=-1, reconnect_time_wait=0.5)
    feed = await subscribe_progress(nc, progress)
    recorder = await record_events(nc, run_dir) if config.logging.events else None
    await asyncio.to_thread(launcher.start_services)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    started = time.monotonic()
    round_started = started
    settle_deadline: float | None = None
    rounds = config.loop.rounds
    next_round = len(done)
    code = 0
    with Live(_status(config, progress, done, started), console=console, refresh_per_second=2) as live:
        while not stop.is_set() and (not rounds or next_round < rounds):
            await asyncio.sleep(0.25)
            for restart in await asyncio.to_thread(launcher.supervise):  # health checks block up to seconds
                progress.on_restart(restart.name, next_round)
            rp = progress.round(next_round)
            if rp.complete(config.loop.mode):
                now = time.monotonic()
                settle_deadline = settle_deadline or now + ROUND_SETTLE_S
                if not await feed.pool_settled():
                    if now < settle_deadline:
                        continue
                    console.print(f"[yellow]round {next_round}: the env had not settled its curriculum decisions "
                                  f"after {ROUND_SETTLE_S:g} s; the round's env/* counts may miss some[/yellow]")
                settle_deadline = None
                record = rp.record(progress.accepted_total, now - round_started)
                if config.loop.mode == "async":  # versions are not tied to rounds: show the newest
                    for role, metrics in progress.latest_trained.items():
                        if f"{role}/version" not in record:
                            record.update({f"{role}/{k}": v for k, v in metrics.items()})
                append_round(run_dir / "metrics.jsonl", record)
                trackers.log_round(record)
                done.append(record)
                round_started = now
                next_round += 1
                reason = format_collapse(done, config.launcher.max_invalid_answer_rate,
                                         config.launcher.invalid_answer_patience)
                if reason:
                    console.print(f"[red bold]stopped:[/red bold] {reason}")
                    code = FORMAT_COLLAPSED
                    break
            elif time.monotonic() - round_started > config.launcher.round_timeout_s:
                raise ServiceFailedError(f"round {next_round} did not complete in {config.launcher.round_timeout_s:g} s "
                                         f"(phase {rp.phase}); see {run_dir / 'logs'}")
            live.update(_status(config, progress, done, started))
    if stop.is_set():
        console.print(f"[yellow]interrupted[/yellow] during round {next_round}; continue with "
                      f"`rlanything run --resume {run_dir}`")
        code = 130
    if recorder is not None and code == 130:
        await recorder.stop()  # Ctrl-C stops at once; a resume replays the streams into the files
    elif recorder is not None:
        if config.launcher.shadow_judge:
            await _shadow_done(nc, config, console)
        await recorder.close(EVENT_DRAIN_S)
    feed.cancel()
    await nc.close()
    return code


async def _shadow_done(nc: nats.NATS, config: RunConfig, console: Console) -> None:
    """Wait (at most `EVENT_DRAIN_S`) until the shadow judge has voted on every trajectory it was
    given: its votes are not part of a round, so the last round can end before them."""
    durable = Consumers.REWARD_SHADOW.name(shadow=config.launcher.shadow_judge["shadow"])
    deadline = time.monotonic() + EVENT_DRAIN_S
    while not await consumer_idle(nc.jetstream(), Consumers.REWARD_SHADOW.stream, durable):
        if time.monotonic() >= deadline:
            console.print(f"[yellow]the shadow judge had not voted on every trajectory after {EVENT_DRAIN_S:g} s "
                          f"(consumer {durable}); its log misses the rest[/yellow]")
            return
        await asyncio.sleep(0.2)


def run_loop(config: RunConfig, run_dir: Path, console: Console, resume: bool = False,
             fail_fast: bool = False) -> int:
    """Run (or resume) the closed loop; returns the exit code (0 done, 3 answer format collapsed,
    130 interrupted). A process that exits is restarted (``launcher.restart``) unless ``fail_fast``.

    Raises:
        ServiceFailedError: a service died, or a round exceeded ``launcher.round_timeout_s``.
    """
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    if not resume:
        (run_dir / USER_CONFIG).write_text(dump_config(config))
    trackers = Trackers(config.logging, run_dir, config.model_dump(mode="json"))
    launcher = Launcher(config, run_dir, console, persistent_nats=True, fail_fast=fail_fast)
    wall = time.monotonic()
    try:
        code = asyncio.run(_follow(config, launcher, run_dir, console, resume, trackers))
    finally:
        launcher.stop()
        trackers.close()
    rounds = read_rounds(run_dir / "metrics.jsonl")
    header = (f"Family `{config.env.families[0].type}`, knobs {config.env.families[0].knobs}; "
              f"{config.env.scheduler.tasks_per_round} tasks × G={config.env.scheduler.group_size} per round, "
              f"λ={config.critic.lam}, m={getattr(config.reward, 'votes', '?')}, "
              f"adaptation {'on' if config.env.adaptation.enabled else 'off'}; "
              f"this invocation took {time.monotonic() - wall:.0f} s.")
    write_plots(rounds, run_dir)
    write_report(rounds, run_dir, header, sampling_section(config))
    console.print(summary_table(rounds, f"RLAnything run {run_dir.name}"))
    console.print(f"run directory: {run_dir}  (report.md, metrics.jsonl, *.png; see it all: rlanything view {run_dir})")
    return code
