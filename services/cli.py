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
) -> None:
    """Start NATS and every service locally, each in its own process, until Ctrl-C.

    Exits 0 after Ctrl-C/SIGTERM, 1 when a service dies or never becomes healthy, 2 on a bad config.
    """
    from services.launcher import Launcher, new_run_dir

    run_config = _load(config, overrides)
    if run_dir is None:
        run_dir = new_run_dir(run_config.launcher.runs_dir, run_config.run_name)
    else:
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    launcher = Launcher(run_config, run_dir, console)
    try:
        launcher.start()
        launcher.watch()
    except ServiceFailedError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None
    finally:
        launcher.stop()


@app.command()
def check_config(config: ConfigArg = None, overrides: SetOpt = None) -> None:
    """Validate a run config and print it resolved (exit 2 when it is invalid)."""
    from services.common.config import dump_config

    typer.echo(dump_config(_load(config, overrides)), nl=False)


if __name__ == "__main__":
    app()
