"""Trackers receive every finite per-round metric at step = round; an extra switched on without
its package fails at start-up naming the field. W&B and MLflow run offline when installed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from services.common.config import LoggingConfig
from services.common.errors import ConfigError
from services.run.trackers import Trackers, flatten

ROUNDS = [{"round": 0, "policy/success_heldout": 0.25, "time/round_s": 5.0, "reward/step_accuracy": float("nan")},
          {"round": 1, "policy/success_heldout": 0.5, "time/round_s": 6.0, "reward/step_accuracy": 0.75}]


def log(cfg: LoggingConfig, run_dir: Path) -> None:
    trackers = Trackers(cfg, run_dir, {"seed": 3, "policy": {"ppo": {"lr": 0.001}}})
    for r in ROUNDS:
        trackers.log_round(r)
    trackers.close()


def test_tensorboard_gets_every_finite_metric_at_its_round(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log(LoggingConfig(), tmp_path)
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("policy/success_heldout")] == [(0, 0.25), (1, 0.5)]
    assert [(e.step, e.value) for e in acc.Scalars("reward/step_accuracy")] == [(1, 0.75)]  # NaN: not measured
    assert "round" not in acc.Tags()["scalars"]


def test_config_is_flattened_for_trackers() -> None:
    assert flatten({"seed": 3, "policy": {"ppo": {"lr": 0.001}}, "x": [1, 2]}) == {
        "seed": 3, "policy.ppo.lr": 0.001, "x": "[1, 2]"}


@pytest.mark.parametrize("field", ["wandb", "mlflow"])
def test_an_extra_without_its_package_fails_at_start_naming_the_field(field: str, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, field, None)  # import fails as if not installed
    with pytest.raises(ConfigError, match=f"logging.{field} is true but {field} is not installed"):
        Trackers(LoggingConfig(tensorboard=False, **{field: True}), tmp_path, {})


def test_wandb_offline_without_a_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    log(LoggingConfig(tensorboard=False, wandb=True), tmp_path)
    assert list(tmp_path.rglob("offline-run-*/run-*.wandb"))


def test_mlflow_file_store_without_a_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    log(LoggingConfig(tensorboard=False, mlflow=True), tmp_path)
    client = mlflow.tracking.MlflowClient((tmp_path / "mlruns").resolve().as_uri())
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [(m.step, m.value) for m in client.get_metric_history(runs[0].info.run_id, "policy/success_heldout")] == [
        (0, 0.25), (1, 0.5)]
    assert runs[0].data.params["policy.ppo.lr"] == "0.001"
