"""Services serve a model they are given; an empty source is a start-up config error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from services.common.config import ModelConfig
from services.common.errors import ConfigError
from services.common.models.source import require_source

ROOT = Path(__file__).resolve().parents[2]



def test_a_given_source_is_returned() -> None:
    assert require_source("policy", ModelConfig(source="smollm2")) == "smollm2"


def test_the_openai_backend_needs_no_local_weights() -> None:
    assert require_source("reward", ModelConfig(backend="openai", openai_model="judge")) == ""


@pytest.mark.parametrize("backend", ["hf", "vllm"])
def test_an_empty_source_names_the_field(backend: str) -> None:
    with pytest.raises(ConfigError, match=r"policy\.model\.source is empty"):
        require_source("policy", ModelConfig(backend=backend))  # type: ignore[arg-type]


@pytest.mark.parametrize("service", ["policy", "reward"])
def test_a_service_started_without_a_source_exits_2_before_building_anything(service: str, tmp_path) -> None:
    cache = tmp_path / "models"
    proc = subprocess.run([sys.executable, "-m", f"services.{service}", "--set", f"{service}.model.cache_dir={cache}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert f"{service}.model.source is empty" in proc.stderr
    assert not cache.exists()  # no tiny model was built in-process
