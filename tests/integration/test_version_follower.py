"""A serving process meets an announced version that fails to load (here a LoRA adapter whose B
matrices were zeroed after its trainer scored the canary): it refuses that version by name, counts
it, keeps serving the one before — no exception, so no restart — and loads the next good version."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from services.common.algo.batching import Sample
from services.common.bus import EventBus
from services.common.checkpoints import VersionStore
from services.common.config import LoraSettings, PPOConfig
from services.common.models.generation import HFGenerator
from services.common.models.tiny import build_tiny_model, train_tokenizer
from services.common.trainer import PPOLearner
from services.common.version_follower import LOAD_FAILURES, VersionFollower

pytestmark = pytest.mark.integration


def _samples(tokenizer) -> list[Sample]:
    return [Sample(f"s{i}", tuple(tokenizer.encode(f"step {i}: move")), tuple(tokenizer.encode(f" left {i % 4}")),
                   1.0 if i % 2 else -1.0) for i in range(8)]


async def test_a_version_that_fails_to_load_is_refused_and_the_last_good_one_kept(bus: EventBus,
                                                                                tmp_path: Path) -> None:
    tokenizer = train_tokenizer([f"step {i}: move left right up down {i % 4}" for i in range(200)], 300)
    base = build_tiny_model(tokenizer, tmp_path / "base", hidden_size=32, layers=2, heads=2)
    cfg = PPOConfig(lr=5e-2, optimizer_steps=2, lora=LoraSettings(rank=4, alpha=8))
    learner = PPOLearner(HFGenerator(str(base)), cfg, tmp_path / "ckpt", reference_source=str(base))
    uris = {v: learner.learn_now("policy", _samples(learner.generator.tokenizer), True, v, None)[1] for v in (1, 2, 3)}
    tensors = load_file(Path(uris[2]) / "adapter_model.safetensors")  # v2 corrupted after it was saved
    save_file({k: torch.zeros_like(t) if "lora_B" in k else t for k, t in tensors.items()},
              str(Path(uris[2]) / "adapter_model.safetensors"))

    versions = await VersionStore.open(bus)
    served = HFGenerator(str(base))
    follower = VersionFollower(versions, "policy", served, logging.getLogger("test"), poll_s=0.05)
    failures = LOAD_FAILURES.labels("policy")._value.get()
    await versions.announce("policy", 1, uris[1], trained_on_round=0)
    assert await follower.load_latest() and served.model_version == 1
    await versions.announce("policy", 2, uris[2], trained_on_round=1)
    watching = asyncio.create_task(follower.run())  # the service's task: it must not end
    await asyncio.sleep(0.5)
    assert not watching.done() and served.model_version == 1
    assert LOAD_FAILURES.labels("policy")._value.get() == failures + 1  # tried once, not at every poll
    assert follower.refused == 2
    await versions.announce("policy", 3, uris[3], trained_on_round=2)
    for _ in range(100):
        if served.model_version == 3:
            break
        await asyncio.sleep(0.05)
    assert served.model_version == 3 and not watching.done()
    watching.cancel()
    shutil.rmtree(tmp_path / "ckpt")
