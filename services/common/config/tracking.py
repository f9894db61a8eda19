"""What a run records besides metrics.jsonl: the event log the run viewer reads, and trackers."""

from __future__ import annotations

from pydantic import Field

from services.common.config.base import StrictModel

__all__ = ["LoggingConfig"]


class LoggingConfig(StrictModel):
    """Run records and experiment trackers (`rlanything run` only; the choice never changes the run)."""

    events: bool = Field(
        True, description="Write judged trajectories, task reports and task-pool decisions to runs/<id>/events/ "
                          "(JSON lines, token ids dropped) for `rlanything view`.")
    tensorboard: bool = Field(True, description="TensorBoard event files in runs/<id>/tensorboard (every round's metrics).")
    wandb: bool = Field(False, description="Weights & Biases (optional extra `wandb`; offline unless WANDB_MODE says otherwise).")
    wandb_project: str = Field("rlanything", description="W&B project name.")
    mlflow: bool = Field(False, description="MLflow (optional extra `mlflow`; a file store in runs/<id>/mlruns unless MLFLOW_TRACKING_URI is set).")
    mlflow_experiment: str = Field("rlanything", description="MLflow experiment name.")
