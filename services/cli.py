"""The `rlanything` command line (typer)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from services.common.config import RunConfig, load_config
from services.common.errors import ConfigError, ServiceFailedError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="RLAnything: policy, reward model and environment trained together.")
console = Console(stderr=True)

ConfigArg = Annotated[Optional[Path], typer.Argument(help="Run config YAML (default: built-in defaults).")]
FailFastOpt = Annotated[bool, typer.Option("--fail-fast", help="Stop everything when any process exits "
                                                                  "(default: restart it, as Kubernetes would).")]
SetOpt = Annotated[Optional[list[str]], typer.Option("--set", help="Dotted override, e.g. policy.server.grpc_port=50052.")]


def _load(config: Optional[Path], overrides: Optional[list[str]]) -> RunConfig:
    try:
        return load_config(config, overrides or [])
    except ConfigError as exc:
        console.print(f"[red]config error:[/red] {exc}", markup=True, highlight=False)
        raise typer.Exit(2) from None


@app.command()
def up(
    config: ConfigArg = None,
    overrides: SetOpt = None,
    run_dir: Annotated[Optional[Path], typer.Option(help="Run directory (default: runs/<name>-<time>).")] = None,
    fail_fast: FailFastOpt = False,
) -> None:
    """Start NATS and every service locally, each in its own process, until Ctrl-C.

    A process that exits, or answers no health check for launcher.restart.unresponsive_s, is
    restarted (launcher.restart: back-off, budget); with --fail-fast the first exit stops
    everything. Exits 0 after Ctrl-C/SIGTERM, 1 when a service dies beyond its restart budget (or
    at once with --fail-fast) or never becomes healthy, 2 on a bad config.
    """
    from services.run.launcher import Launcher, new_run_dir

    run_config = _load(config, overrides)
    if run_dir is None:
        run_dir = new_run_dir(run_config.launcher.runs_dir, run_config.run_name)
    else:
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    launcher = Launcher(run_config, run_dir, console, fail_fast=fail_fast)
    try:
        launcher.start()
        launcher.watch()
    except ServiceFailedError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None
    finally:
        launcher.stop()


@app.command()
def run(
    config: ConfigArg = None,
    overrides: SetOpt = None,
    resume: Annotated[Optional[Path], typer.Option(help="Continue runs/<id> from its last completed round.")] = None,
    run_dir: Annotated[Optional[Path], typer.Option(help="Run directory (default: runs/<name>-<time>).")] = None,
    fail_fast: FailFastOpt = False,
) -> None:
    """Run the closed loop: cold start (cached), NATS + the five services, live progress, report.

    Writes runs/<id>/ with config.yaml, metrics.jsonl, report.md and PNG curves. Exits 0 when
    all ``loop.rounds`` rounds are done, 130 after Ctrl-C (resume with --resume),
    1 when a service dies beyond its restart budget (at once with --fail-fast), 2 on a bad config.
    """
    from services.run.launcher import new_run_dir
    from services.run.coldstart import coldstart_errors, coldstart_judge, coldstart_policy, policy_needs_coldstart
    from services.run.sources import needs_judge_source
    from services.run.driver import load_for_resume, run_loop

    if resume is not None:
        if config is not None:
            console.print("[red]error:[/red] give either CONFIG or --resume, not both")
            raise typer.Exit(2)
        try:
            run_config = load_for_resume(resume)
        except ConfigError as exc:
            console.print(f"[red]cannot resume:[/red] {exc}", highlight=False)
            raise typer.Exit(2) from None
        target = resume
    else:
        run_config = _load(config, overrides)
        if run_config.loop.rounds == 0:
            console.print("[red]config error:[/red] loop.rounds must be > 0 for `rlanything run` (got 0)")
            raise typer.Exit(2)
        if problems := coldstart_errors(run_config):
            console.print(f"[red]config error:[/red] {'; '.join(problems)}", highlight=False)
            raise typer.Exit(2)
        if run_config.launcher.coldstart:
            say = lambda msg: console.print(msg, highlight=False)  # noqa: E731
            if policy_needs_coldstart(run_config):
                run_config.policy.model.source = coldstart_policy(run_config, say)
            if needs_judge_source(run_config) and run_config.reward.model.backend == "hf":
                run_config.reward.model.source = coldstart_judge(run_config, say)
        target = run_dir or new_run_dir(run_config.launcher.runs_dir, run_config.run_name)
    try:
        code = run_loop(run_config, target, console, resume=resume is not None, fail_fast=fail_fast)
    except ServiceFailedError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None
    raise typer.Exit(code)


@app.command()
def sft(
    config: ConfigArg = None,
    overrides: SetOpt = None,
    out: Annotated[Path, typer.Option(help="Where to save the cold-started model (a Hugging Face directory).")] = Path(
        "runs/sft-policy"),
    family_index: Annotated[int, typer.Option(help="Which entry of env.families to learn from.")] = 0,
) -> None:
    """Cold start: train the policy on the environment's expert trajectories, print success before/after.

    Budget and data come from ``policy.sft`` (episodes, steps, batch_size, lr, eval_episodes);
    the model from ``policy.model`` (``source: ''`` builds the tiny model with a tokenizer
    trained on the family's own text). The demonstrations skip the run's held-out and OOD
    instances (those of ``env.families`` and ``seed``).
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from services.env.families.registry import build_family
    from services.offline.policy_sft import run_sft
    from services.run.coldstart import held_out_keys, sft_lora, sft_target

    run_config = _load(config, overrides)
    try:
        fam_cfg = run_config.env.families[family_index]
    except IndexError:
        console.print(f"[red]error:[/red] --family-index {family_index}: env.families has "
                      f"{len(run_config.env.families)} entries")
        raise typer.Exit(2) from None
    pcfg = run_config.policy
    family = build_family(fam_cfg, run_config.env.cache_dir, run_config.env.sandbox)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task(f"SFT on {fam_cfg.type}: evaluating before",
                                 total=pcfg.sft.max_steps if pcfg.sft.target_success else pcfg.sft.steps)

        def report(kind: str, value: float) -> None:
            if kind == "before":
                console.print(f"success before SFT: {value:.3f} on {pcfg.sft.eval_episodes} held-out tasks")
                progress.update(task, description=f"SFT on {fam_cfg.type}: training")
            elif kind == "check":
                console.print(f"success after {progress.tasks[task].completed:.0f} steps: {value:.3f} "
                              f"(target {pcfg.sft.target_success:g})")
            else:
                progress.update(task, completed=int(value))

        result = run_sft(family, fam_cfg, pcfg.sft, pcfg.model.tiny, out, pcfg.rollout.history_steps,
                         run_config.seed, pcfg.sft.source or pcfg.model.source, report,
                         lora=sft_lora(run_config), cache_dir=pcfg.model.cache_dir,
                         excluded=held_out_keys(run_config, family), **sft_target(pcfg.sft))
    console.print(f"success before: {result.success_before:.3f}  after: {result.success_after:.3f}  "
                  f"({result.demonstrations} expert steps, {result.steps} optimizer steps, {result.seconds:.0f} s)")
    console.print(f"model saved to {result.model_dir}")


@app.command()
def check_config(config: ConfigArg = None, overrides: SetOpt = None) -> None:
    """Validate a run config and print it resolved (exit 2 when it is invalid)."""
    from services.common.config import dump_config

    typer.echo(dump_config(_load(config, overrides)), nl=False)


@app.command()
def view(
    run_dir: Annotated[Path, typer.Argument(help="A run directory (runs/<id>), finished or running.")],
    out: Annotated[Optional[Path], typer.Option("--out", help="Where to write the page (default RUN_DIR/view.html).")] = None,
    serve: Annotated[bool, typer.Option("--serve", help="Serve it on loopback, rebuilt on every load.")] = False,
    port: Annotated[int, typer.Option("--port", help="Port for --serve (0 = a free one).")] = 8765,
    limit: Annotated[int, typer.Option("--limit", help="Trajectories embedded at most (0 = all).")] = 2000,
    refresh_s: Annotated[int, typer.Option("--refresh", help="--serve: a running run's page reloads this often (s).")] = 10,
) -> None:
    """Write one self-contained HTML page of a run: curves, phase times, the task pool's history, and
    every trajectory step by step with the judge's votes, the oracle label and the advantages."""
    from services.run.view_server import serve_view, write_view

    if not run_dir.is_dir():
        console.print(f"[red]error:[/red] run directory {run_dir} does not exist")
        raise typer.Exit(2)
    if serve:
        serve_view(run_dir, port, limit, refresh_s, console)
        return
    path = write_view(run_dir, out or run_dir / "view.html", limit)
    console.print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB); open it in a browser")


@app.command()
def trace(
    trajectory_id: Annotated[str, typer.Argument(help="A trajectory id, e.g. r3/gym_text/train-0007/v1/2.")],
    run_dir: Annotated[Optional[Path], typer.Option("--run", help="The run directory (default: the newest in runs/).")] = None,
) -> None:
    """Print where a trajectory came from and where it went: task version, policy and judge
    versions, votes against oracle labels, its group, and the versions trained on its samples."""
    from services.run.trace import TraceError, trace_lines

    if run_dir is None:
        runs = sorted((p for p in Path("runs").glob("*") if (p / "events").is_dir()), key=lambda p: p.stat().st_mtime)
        if not runs:
            console.print("[red]error:[/red] no run directory with events/ under runs/; pass --run RUN_DIR")
            raise typer.Exit(2)
        run_dir = runs[-1]
    try:
        lines = trace_lines(run_dir, trajectory_id)
    except TraceError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(2) from None
    typer.echo("\n".join(lines))


@app.command()
def replay(
    run_dir: Annotated[Path, typer.Argument(help="A finished run directory (runs/<id>) with events/.")],
    judge: Annotated[str, typer.Option("--judge", help="The judge to compare with: host:port of a running "
                                                       "RewardModel, or a run config YAML whose reward: section "
                                                       "is the judge (started for this command).")] = "",
    shadow: Annotated[bool, typer.Option("--shadow", help="Compare the run's shadow judge (its stored votes, "
                                                          "launcher.shadow_judge) instead; no judging.")] = False,
    overrides: Annotated[Optional[list[str]], typer.Option("--set", help="Override of the judge config, e.g. "
                                                                         "reward.model.source=runs/x/checkpoints/reward/v20.")] = None,
    votes: Annotated[int, typer.Option("--votes", help="Votes per step (0 = as many as the run cast).")] = 0,
    temperature: Annotated[Optional[float], typer.Option(
        "--temperature", help="Vote sampling temperature (0 = greedy; unset = the judge's configured one).")] = None,
    greedy: Annotated[bool, typer.Option("--greedy", help="Greedy votes (temperature 0), whatever the judge is "
                                                          "configured with.")] = False,
    limit: Annotated[int, typer.Option("--limit", help="Trajectories at most (0 = all).")] = 0,
    version: Annotated[Optional[int], typer.Option("--version", help="Only trajectories the run judged with this "
                                                                     "RM version.")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Report file (default RUN_DIR/replay.md).")] = None,
) -> None:
    """Judge a run's stored trajectories again with another judge and compare with the stored votes
    (step accuracy vs the oracle, identical votes, agreement, outcome accuracy, invalid votes), then
    list the steps whose votes differ."""
    import grpc as _grpc

    from services.common.errors import ConfigError, ServiceFailedError
    from services.run.judge_process import describe, judge_config, local_judge
    from services.run.replay import compare, replay_run, report_markdown, shadow_pairs, vote_diffs, write_pairs

    if shadow == bool(judge):
        console.print("[red]error:[/red] give exactly one of --judge HOST:PORT|CONFIG and --shadow")
        raise typer.Exit(2)
    if temperature is not None and temperature < 0:
        console.print(f"[red]error:[/red] --temperature must be >= 0, got {temperature}")
        raise typer.Exit(2)
    if greedy and temperature:
        console.print(f"[red]error:[/red] --greedy means temperature 0; --temperature {temperature} contradicts it")
        raise typer.Exit(2)
    greedy = greedy or temperature == 0
    sampled = 0.0 if greedy or temperature is None else temperature
    try:
        if shadow:
            pairs, who = shadow_pairs(run_dir), "the run's shadow judge"
        elif Path(judge).suffix in (".yaml", ".yml") or Path(judge).is_file():
            config = judge_config(Path(judge), overrides or [])
            with local_judge(config, lambda line: console.print(line, highlight=False)) as address:
                who = f"{describe(config)} ({judge})"
                pairs = replay_run(run_dir, address, votes, sampled, limit, version, greedy=greedy)
        else:
            pairs = replay_run(run_dir, judge, votes, sampled, limit, version, greedy=greedy)
            who = f"the judge at {judge}"
    except (FileNotFoundError, ConfigError) as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(2) from None
    except ServiceFailedError as exc:
        console.print(f"[red]error:[/red] the judge did not start: {exc}", highlight=False)
        raise typer.Exit(1) from None
    except _grpc.RpcError as exc:
        console.print(f"[red]error:[/red] the judge at {judge} answered {exc.code().name}: {exc.details()}")
        raise typer.Exit(1) from None
    if not shadow:
        who += ", greedy votes" if greedy else f", temperature {sampled:g}" if sampled else ", its own temperature"
    figures = compare(pairs)
    path = out or run_dir / "replay.md"
    path.write_text(report_markdown(figures, run_dir, who, pairs))
    steps = path.with_suffix(".jsonl")
    write_pairs(pairs, steps)
    differ = len(vote_diffs(pairs))
    typer.echo(report_markdown(figures, run_dir, who) + f"\n({len(pairs)} steps, {differ} with votes that differ; "
               f"written to {path}, every step's votes to {steps})")


contract_app = typer.Typer(add_completion=False, no_args_is_help=True,
                           help="Check a service implementation against its contract (proto/).")
app.add_typer(contract_app, name="contract")


def _print_clauses(results: list, address: str) -> None:
    """Print each clause (a failed one with what was sent, what came back, what is required) and
    exit 1 when any failed."""
    for r in results:
        if r.passed:
            typer.echo(f"PASS  {r.clause}")
        else:
            typer.echo(f"FAIL  {r.clause}\n      sent:     {r.sent}\n      got:      {r.got}\n"
                       f"      required: {r.required}")
    failed = sum(not r.passed for r in results)
    typer.echo(f"{len(results) - failed} of {len(results)} clauses hold for {address}")
    raise typer.Exit(1 if failed else 0)


AddressArg = Annotated[str, typer.Argument(help="host:port of the gRPC server to check.")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Seconds per call.")]


@contract_app.command("env")
def contract_env(address: AddressArg, timeout_s: TimeoutOpt = 30.0) -> None:
    """Run the Environment contract's clauses against ADDRESS; exit 1 if any fails."""
    from services.contract.env_contract import check_environment

    _print_clauses(check_environment(address, timeout_s), address)


@contract_app.command("policy")
def contract_policy(
    address: AddressArg,
    openai_url: Annotated[str, typer.Option("--openai", help="Its OpenAI-compatible base URL, e.g. "
                                                             "http://127.0.0.1:8000/v1 ('' = skip that clause).")] = "",
    timeout_s: TimeoutOpt = 60.0,
) -> None:
    """Run the Policy contract's clauses (Generate, and the OpenAI endpoint with --openai) against ADDRESS."""
    from services.contract.policy_contract import check_policy

    if not openai_url:
        typer.echo("(no --openai URL: clause 4 checks nothing)")
    _print_clauses(check_policy(address, openai_url, timeout_s), address)


@contract_app.command("reward")
def contract_reward(
    address: AddressArg,
    timeout_s: TimeoutOpt = 120.0,
    kind: Annotated[str, typer.Option(help="What the reward model writes (reward.kind): step_judge or "
                                           "unit_tests.")] = "step_judge",
) -> None:
    """Run the RewardModel contract's clauses against ADDRESS; exit 1 if any fails."""
    from services.contract.reward_contract import check_reward_model

    _print_clauses(check_reward_model(address, timeout_s, kind), address)


@contract_app.command("critic")
def contract_critic(address: AddressArg, timeout_s: TimeoutOpt = 30.0) -> None:
    """Run the Critic contract's clauses against ADDRESS; exit 1 if any fails."""
    from services.contract.critic_contract import check_critic

    _print_clauses(check_critic(address, timeout_s), address)


bench_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Benchmarks that run the whole loop.")
app.add_typer(bench_app, name="bench")


@bench_app.command("table1")
def bench_table1(
    config: Annotated[Path, typer.Argument(help="Base run config YAML.")] = Path("configs/default.yaml"),
    overrides: SetOpt = None,
    seeds: Annotated[str, typer.Option(help="Comma-separated seeds.")] = "0,1,2",
    out_dir: Annotated[Optional[Path], typer.Option(help="Where the runs go (default: runs/table1/<config's "
                                                         "name without .yaml>).")] = None,
    table: Annotated[Path, typer.Option(help="The table (a PNG of the curves is written beside it).")] = Path(
        "bench/table1.md"),
    rows: Annotated[str, typer.Option(help="Comma-separated row keys to run (default: all); the table "
                                           "counts every complete run of the seeds.")] = "",
) -> None:
    """The paper's Table 1 at CPU scale: outcome-only, + step reward, + RM training, + environment
    adaptation, each for every seed at the same budget. Completed runs in OUT_DIR are reused when they
    were started from the same config and settings (a finished run of another stops the table).

    Exits 0 when every run completed, 1 when some failed (the table counts the rest), 2 on a bad config.
    """
    from services.run.table1_bench import run_table1

    _load(config, overrides)  # fail fast on a bad base config
    try:
        seed_list = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        console.print(f"[red]error:[/red] --seeds must be comma-separated integers, got {seeds!r}")
        raise typer.Exit(2) from None
    try:
        failed = run_table1(config, seed_list, overrides or [], out_dir or Path("runs/table1") / config.stem, table,
                            lambda msg: console.print(msg, highlight=False),
                            rows=[r.strip() for r in rows.split(",") if r.strip()])
    except ValueError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    console.print(f"wrote {table} and {table.with_suffix('.png')}")
    raise typer.Exit(1 if failed else 0)


if __name__ == "__main__":
    app()
