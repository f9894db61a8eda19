"""Data-parallel PPO with FSDP2: the same global batch on one process and on two (torchrun, gloo on
CPU) gives the same updated weights."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from services.common.nats_server import free_port
from services.common.ppo_update import ppo_update
from tests.integration.trainer.dp_case import CFG, lora_learner, model, samples

pytestmark = pytest.mark.integration

WORKER = Path(__file__).with_name("dp_worker.py")


def torchrun(*args: str) -> None:
    """The worker on two gloo ranks (torchrun on a free loopback port)."""
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                           "--master_addr", "127.0.0.1", "--master_port", str(free_port()), str(WORKER), *args],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]


def test_two_sharded_processes_update_the_weights_as_one_process_does(tmp_path: Path) -> None:
    single = model()
    m_single = ppo_update(single, torch.optim.AdamW(single.parameters(), lr=CFG.lr), samples(), CFG, 0,
                          reference=model(), seed=5)
    out = tmp_path / "two.pt"
    torchrun(str(out))
    two = torch.load(out)
    assert two["world"] == 2
    assert two["metrics"]["ppo/optimizer_steps"] == m_single["ppo/optimizer_steps"] == 4.0
    moved = max(float((a - b).abs().max()) for a, b in zip(single.state_dict().values(), model().state_dict().values()))
    assert moved > 1e-4  # the update trained
    for name, value in single.state_dict().items():
        torch.testing.assert_close(two["state"][name], value, rtol=1e-4, atol=1e-6, msg=name)
    for key in ("ppo/loss", "ppo/kl", "ppo/clip_fraction", "ppo/ref_kl", "ppo/kl_max"):
        assert two["metrics"][key] == pytest.approx(m_single[key], rel=1e-4, abs=1e-7), key


def test_lora_on_two_sharded_processes_leaves_the_whole_adapter_as_one_process_trains_it(tmp_path: Path) -> None:
    """FSDP2 shards the adapters with the base; the checkpoint rank 0 writes holds every adapter matrix
    whole (not rank 0's shard) and equal to the one-process update's."""
    from safetensors.torch import load_file

    from services.common.models.tiny import build_tiny_model, train_tokenizer

    tokenizer = train_tokenizer([f"step {i}: move left right up down" for i in range(100)], 300)
    base = build_tiny_model(tokenizer, tmp_path / "base", hidden_size=32, layers=2, heads=2)
    m_single, uri_single = lora_learner(str(base), str(tmp_path / "one")).learn_now("policy", samples(), True, 1, None)
    out = tmp_path / "two.pt"
    torchrun(str(out), str(base), str(tmp_path / "two"))
    two = torch.load(out)
    assert two["world"] == 2 and Path(two["uri"]) == tmp_path / "two" / "policy" / "v1"
    assert two["metrics"]["ppo/optimizer_steps"] == m_single["ppo/optimizer_steps"] > 0
    one_adapter = load_file(Path(uri_single) / "adapter_model.safetensors")
    two_adapter = load_file(Path(two["uri"]) / "adapter_model.safetensors")
    assert sorted(two_adapter) == sorted(one_adapter)
    assert len(one_adapter) == 2 * 7 * 2  # A and B of 7 target modules in each of 2 layers
    assert max(float(v.abs().max()) for k, v in one_adapter.items() if "lora_B" in k) > 1e-4  # B left zero: trained
    for name, value in one_adapter.items():
        assert two_adapter[name].shape == value.shape, name  # whole, not a shard of it
        # float sums in another order: AdamW's near sign-like steps (lr 2e-2) carry it to ~1e-5 on a few entries
        torch.testing.assert_close(two_adapter[name], value, rtol=1e-4, atol=5e-5, msg=name)
    for key in ("ppo/loss", "ppo/kl", "ppo/ref_kl", "ppo/kl_max"):
        assert two["metrics"][key] == pytest.approx(m_single[key], rel=1e-4, abs=1e-7), key
