"""A judge started from a run config for one command (`rlanything replay RUN_DIR --judge CONFIG`):
the reward service of the config's ``reward:`` section, role ``judge``, on a private NATS server.

An llm judge with an empty ``reward.model.source`` gets the config's cold-started judge (the cache
of `rlanything run`, built when missing) — the version 0 of a run of that config; point
``reward.model.source`` at a checkpoint directory (``runs/<id>/checkpoints/reward/v<N>``) for a
later version.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console

from services.common.config import RunConfig, load_config
from services.run.launcher import Launcher

__all__ = ["judge_config", "local_judge", "describe"]


def judge_config(path: Path, overrides: list[str] | None = None) -> RunConfig:
    """The config of the judge: ``path`` with ``overrides`` (dotted ``key=value``), only the reward
    service, role ``judge``, no shadow.

    Raises:
        ConfigError: the file or an override is not a valid run config.
    """
    config = load_config(path, overrides)
    config.launcher.services = ["reward"]
    config.launcher.shadow_judge = {}
    config.reward.role = "judge"
    config.reward.shadow = ""
    return config


def describe(config: RunConfig) -> str:
    """Which judge a config runs, in words (for the replay report's title)."""
    r = config.reward
    if r.backend == "llm":
        return f"the llm judge {r.model.source or '(cold start)'}"
    if r.backend == "openai":
        return f"the openai judge {r.model.openai_model} at {r.model.openai_base_url}"
    return "the oracle judge"


@contextmanager
def local_judge(config: RunConfig, log: Callable[[str], None] = print) -> Iterator[str]:
    """Start the judge of ``config`` (from `judge_config`) and yield its gRPC ``host:port``; stop
    it and its NATS server on exit. Cold-starts an llm judge without a source first (cached).

    Raises:
        ServiceFailedError: the judge did not become SERVING (its log is named).
    """
    if config.reward.backend == "llm" and not config.reward.model.source and config.launcher.coldstart:
        from services.run.coldstart import coldstart_judge

        config.reward.model.source = coldstart_judge(config, log)
    with tempfile.TemporaryDirectory(prefix="rla-judge-") as where:
        (Path(where) / "logs").mkdir()
        launcher = Launcher(config, Path(where), Console(stderr=True, quiet=True))
        try:
            launcher.start()
            yield launcher.services[0].address
        finally:
            launcher.stop()
