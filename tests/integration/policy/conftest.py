"""A tiny policy model built once per test session (tokenizer trained on FrozenLake text)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.config import FamilyConfig, TinyModelConfig
from services.env.families.frozenlake import FrozenLakeFamily
from services.offline.policy_sft import build_tiny_for, demonstrations
from tests.serving import serving

__all__ = ["tiny_model_dir", "serving"]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised tiny Qwen2 model saved as a Hugging Face directory."""
    fam = FamilyConfig(type="gym_text", knobs={"size": 4, "hole_prob": 0.2})
    demos = demonstrations(FrozenLakeFamily(), fam, 20, history_steps=2)
    return build_tiny_for(demos, tmp_path_factory.mktemp("tiny") / "model", TinyModelConfig(hidden_size=64))
