"""Data-parallel PPO with FSDP2: the same global batch on one process and on two (torchrun, gloo on
CPU) gives the same updated weights."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from services.common.nats_server import free_port
from services.common.training import ppo_update
from tests.integration.trainer.dp_case import CFG, model, samples

pytestmark = pytest.mark.integration

WORKER = Path(__file__).with_name("dp_worker.py")


def test_two_sharded_processes_update_the_weights_as_one_process_does(tmp_path: Path) -> None:
    single = model()
    m_single = ppo_update(single, torch.optim.AdamW(single.parameters(), lr=CFG.lr), samples(), CFG, 0,
                          reference=model(), seed=5)
    out = tmp_path / "two.pt"
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                           "--master_addr", "127.0.0.1", "--master_port", str(free_port()), str(WORKER), str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    two = torch.load(out)
    assert two["world"] == 2
    assert two["metrics"]["ppo/optimizer_steps"] == m_single["ppo/optimizer_steps"] == 4.0
    moved = max(float((a - b).abs().max()) for a, b in zip(single.state_dict().values(), model().state_dict().values()))
    assert moved > 1e-4  # the update trained
    for name, value in single.state_dict().items():
        torch.testing.assert_close(two["state"][name], value, rtol=1e-4, atol=1e-6, msg=name)
    for key in ("ppo/loss", "ppo/kl", "ppo/clip_fraction", "ppo/ref_kl", "ppo/kl_max"):
        assert two["metrics"][key] == pytest.approx(m_single[key], rel=1e-4, abs=1e-7), key
