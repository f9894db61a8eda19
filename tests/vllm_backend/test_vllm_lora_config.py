"""How the `vllm` backend learns that versions are LoRA adapters, and what it refuses (pure logic, no vLLM).

The policy and reward configs start their engine with LoRA when their trainer trains adapters
(`serve_lora_in_vllm`); an adapter the engine could not serve fails at start-up (config) or at its
load (`check_adapter`), with the setting to change in the message.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from services.common.config import PolicyServiceConfig, RewardServiceConfig
from services.common.models.vllm_engine import Adapter, check_adapter, lora_engine_args, read_adapter


def policy(**model_and_ppo: dict) -> PolicyServiceConfig:
    return PolicyServiceConfig.model_validate(model_and_ppo)


def test_a_policy_that_trains_lora_starts_its_vllm_engine_with_that_rank() -> None:
    cfg = policy(model={"backend": "vllm"}, ppo={"lora": {"rank": 16}})
    assert cfg.model.vllm.max_lora_rank == 16
    assert lora_engine_args(cfg.model.vllm.max_lora_rank) == {"enable_lora": True, "max_lora_rank": 16,
                                                              "max_loras": 1, "max_cpu_loras": 2}
    assert policy(model={"backend": "vllm", "vllm": {"max_lora_rank": 64}},
                  ppo={"lora": {"rank": 16}}).model.vllm.max_lora_rank == 64  # an explicit larger rank stays
    assert policy(model={"backend": "vllm"}).model.vllm.max_lora_rank == 0  # full fine-tune: no LoRA
    assert policy(ppo={"lora": {"rank": 16}}).model.vllm.max_lora_rank == 0  # the hf backend: untouched
    judge = RewardServiceConfig.model_validate({"model": {"backend": "vllm"}, "ppo": {"lora": {"rank": 4}}})
    assert judge.model.vllm.max_lora_rank == 4


def test_a_config_whose_engine_could_not_serve_the_adapters_fails_at_start_up() -> None:
    with pytest.raises(ValidationError, match=r"policy\.model\.vllm\.max_lora_rank=8 is below policy\.ppo\.lora\.rank=16"):
        policy(model={"backend": "vllm", "vllm": {"max_lora_rank": 8}}, ppo={"lora": {"rank": 16}})
    with pytest.raises(ValidationError, match=r"policy\.ppo\.lora\.modules_to_save \['lm_head'\] cannot be served"):
        policy(model={"backend": "vllm"}, ppo={"lora": {"rank": 16, "modules_to_save": ["lm_head"]}})
    with pytest.raises(ValidationError, match=r"max_lora_rank"):
        policy(model={"backend": "vllm", "vllm": {"max_lora_rank": 600}})


@pytest.mark.parametrize(("rank", "engine_rank"), [(1, 1), (2, 8), (8, 8), (9, 16), (300, 320), (512, 512)])
def test_the_engine_rank_is_the_smallest_vllm_accepts_that_holds_the_adapters(rank: int, engine_rank: int) -> None:
    assert lora_engine_args(rank)["max_lora_rank"] == engine_rank


def test_engine_arguments_without_lora_and_beyond_vllms_largest_rank() -> None:
    assert lora_engine_args(0) == {}
    with pytest.raises(ValueError, match=r"max_lora_rank must be in 0\.\.512, got 513"):
        lora_engine_args(513)


def write_adapter(directory: Path, **config: object) -> Path:
    directory.mkdir(parents=True)
    (directory / "adapter_config.json").write_text(json.dumps({"r": 8, "base_model_name_or_path": "/m/base",
                                                               **config}))
    (directory / "adapter_model.safetensors").write_bytes(b"")
    return directory


def test_an_adapter_is_read_from_peft_s_config(tmp_path: Path) -> None:
    adapter = read_adapter(write_adapter(tmp_path / "v3", r=4, modules_to_save=None, use_dora=False))
    assert adapter == Adapter((tmp_path / "v3").resolve(), 4, "/m/base", (), False)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "adapter_config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="holds no adapter_model.safetensors"):
        read_adapter(tmp_path / "empty")


@pytest.mark.parametrize(("adapter", "max_lora_rank", "message"), [
    (Adapter(Path("/c/v1"), 8, "/m", ()), 0, "started without LoRA; set model.vllm.max_lora_rank"),
    (Adapter(Path("/c/v1"), 16, "/m", ()), 8, r"rank 16\): rank must be in 1\.\.8"),
    (Adapter(Path("/c/v1"), 0, "/m", ()), 8, r"rank must be in 1\.\.8"),
    (Adapter(Path("/c/v1"), 8, "/m", ("lm_head",)), 8, r"modules_to_save \['lm_head'\]"),
    (Adapter(Path("/c/v1"), 8, "/m", (), dora=True), 8, "DoRA"),
])
def test_an_adapter_the_engine_cannot_serve_is_refused(adapter: Adapter, max_lora_rank: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_adapter(adapter, max_lora_rank)
    check_adapter(Adapter(Path("/c/v1"), 8, "/m", ()), 8)  # the same engine serves a fitting adapter
