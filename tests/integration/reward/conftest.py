"""A tiny random judge built once per test session (tokenizer trained on FrozenLake judge chats)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.config import FamilyConfig, RewardServiceConfig
from services.offline.bootstrap import tiny_judge


@pytest.fixture(scope="session")
def tiny_judge_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised tiny judge saved as a Hugging Face directory."""
    cfg = RewardServiceConfig(model={"cache_dir": str(tmp_path_factory.mktemp("judge")), "tiny": {"hidden_size": 64}},
                              prompt_chars=200, field_chars=120)
    return Path(tiny_judge(cfg, FamilyConfig(type="gym_text", knobs={"size": 4, "hole_prob": 0.2})))
