"""Experiment trackers fed with every round's metrics: TensorBoard (default), W&B and MLflow.

Each tracker receives the run config once and every line `metrics.jsonl` gets, at step = round.
They only read: whichever are on, the run is the same. W&B and MLflow are optional extras; a
tracker switched on without its package fails at start-up, naming the config field.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from services.common.config import LoggingConfig
from services.common.errors import ConfigError

__all__ = ["Trackers", "flatten"]


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}`` (lists kept as their string)."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v if isinstance(v, (int, float, str, bool)) else str(v)
    return out


class Trackers:
    """The trackers ``cfg`` switches on, writing under ``run_dir``.

    Raises:
        ConfigError: ``logging.wandb`` or ``logging.mlflow`` is on without its package installed.
    """

    def __init__(self, cfg: LoggingConfig, run_dir: Path, run_config: dict[str, Any]) -> None:
        self.tensorboard: Any = None
        self.wandb: Any = None
        self.mlflow: Any = None
        params = flatten(run_config)
        if cfg.tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.tensorboard = SummaryWriter(str(run_dir / "tensorboard"))
            self.tensorboard.add_text("config", "\n".join(f"    {k}: {v}" for k, v in sorted(params.items())))
        if cfg.wandb:
            try:
                import wandb
            except ImportError as exc:
                raise ConfigError("logging.wandb is true but wandb is not installed: pip install wandb") from exc
            self.wandb = wandb.init(project=cfg.wandb_project, name=run_dir.name, id=run_dir.name, dir=str(run_dir),
                                    config=params, resume="allow", mode=os.environ.get("WANDB_MODE", "offline"))
        if cfg.mlflow:
            try:
                import mlflow
            except ImportError as exc:
                raise ConfigError("logging.mlflow is true but mlflow is not installed: pip install mlflow") from exc
            if not os.environ.get("MLFLOW_TRACKING_URI"):  # no server: a file store beside the run's other records
                os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks for a database otherwise
                mlflow.set_tracking_uri((run_dir / "mlruns").resolve().as_uri())
            mlflow.set_experiment(cfg.mlflow_experiment)
            mlflow.start_run(run_name=run_dir.name)
            mlflow.log_params({k[:250]: str(v)[:500] for k, v in params.items()})
            self.mlflow = mlflow

    def log_round(self, record: dict[str, float]) -> None:
        """Every finite value of one metrics.jsonl line, at step ``record["round"]``."""
        step = int(record.get("round", 0))
        values = {k: float(v) for k, v in record.items()
                  if isinstance(v, (int, float)) and math.isfinite(v) and k != "round"}
        if self.tensorboard is not None:
            for k, v in values.items():
                self.tensorboard.add_scalar(k, v, step)
            self.tensorboard.flush()
        if self.wandb is not None:
            self.wandb.log(values, step=step)
        if self.mlflow is not None:
            self.mlflow.log_metrics(values, step=step)

    def close(self) -> None:
        """Flush and close every tracker."""
        if self.tensorboard is not None:
            self.tensorboard.close()
        if self.wandb is not None:
            self.wandb.finish()
        if self.mlflow is not None:
            self.mlflow.end_run()
