"""Thin entry point shared by `python -m services.<name> --config FILE [--set key=value ...]`.

Parses and validates the config first (a bad config fails before any work, exit code 2), then
imports the service's heavy modules and runs it.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Coroutine, Optional

import typer

from services.common.config import load_config
from services.common.errors import ConfigError, ServiceFailedError
from services.common.logs import configure_logging
from services.common.parent_watch import watch_parent
from services.common.task_stop import STOP_TASKS_S, cancel_until_done

__all__ = ["service_main"]


def _run_without_joining_threads(coro: Coroutine[Any, Any, int]) -> int:
    """``asyncio.run`` without waiting for the default executor's threads (``asyncio.run`` joins
    them for up to 300 s; an in-flight model call would delay a stop the launcher is waiting for)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(coro)
    except BaseException:
        # A failed start or crash: tidy up like asyncio.run (cancel tasks, close the loop) so the
        # error is reported and gRPC's poller is not torn down under a live loop.
        loop.run_until_complete(cancel_until_done(asyncio.all_tasks(loop), STOP_TASKS_S))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
        raise


def service_main(name: str, factory: str) -> None:
    """Run service ``name``; ``factory`` is ``"module:callable"`` taking a RunConfig → Service."""

    def command(
        config: Annotated[Optional[Path], typer.Option("--config", "-c", help="Run config YAML.")] = None,
        overrides: Annotated[Optional[list[str]], typer.Option("--set", help="Dotted override key=value.")] = None,
    ) -> None:
        try:
            run_config = load_config(config, overrides or [])
        except ConfigError as exc:
            typer.echo(f"{name}: config error: {exc}", err=True)
            raise typer.Exit(2) from None
        configure_logging(name, getattr(run_config, name).log_level)
        watch_parent()  # started by a launcher (RLA_PARENT_PID): stop when it is gone
        if int(os.environ.get("LOCAL_RANK", "0") or 0) > 0:
            # torchrun's further processes on a node: the node's first process owns the configured ports
            server = getattr(run_config, name).server
            server.grpc_port = server.metrics_port = 0
        module_name, attr = factory.split(":")
        from services.common.runtime import run_service  # heavy imports after validation

        try:
            service = getattr(importlib.import_module(module_name), attr)(run_config)
        except ConfigError as exc:
            typer.echo(f"{name}: config error: {exc}", err=True)
            raise typer.Exit(2) from None
        try:
            code = _run_without_joining_threads(run_service(service))
        except ServiceFailedError as exc:
            typer.echo(f"{name}: {exc}", err=True)
            raise typer.Exit(1) from None
        # run_service has drained NATS and stopped gRPC; a generate call still running in a worker
        # thread (seconds on a loaded CPU) must not hold the exit, so skip the interpreter's join.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    app = typer.Typer(add_completion=False, help=f"RLAnything {name} service.")
    app.command()(command)
    app(prog_name=f"python -m services.{name}", args=sys.argv[1:])
