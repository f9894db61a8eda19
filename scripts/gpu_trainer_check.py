"""One LoRA PPO update of SmolLM2-135M-Instruct on the GPU, sharded with FSDP2 over the torchrun ranks.

Run by scripts/gpu_check.sh twice, on one rank and on two (NCCL puts one rank per GPU, so two ranks
need two GPUs; with one GPU both runs use one rank and the script says so). Rank 0 writes a JSON
line to OUT: world size, seconds, peak GPU memory (bytes, torch.cuda.max_memory_allocated), the
metrics, and the adapter's path, so the caller can compare the two adapters.

Usage: torchrun --nproc_per_node N scripts/gpu_trainer_check.py OUT CHECKPOINT_DIR
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.common.algo.batching import Sample  # noqa: E402
from services.common.config import LoraSettings, PPOConfig  # noqa: E402
from services.common.data_parallel import join_process_group  # noqa: E402
from services.common.models.generation import HFGenerator  # noqa: E402
from services.common.trainer import PPOLearner  # noqa: E402

CFG = PPOConfig(lr=1e-4, optimizer_steps=4, ref_beta=0.05, lora=LoraSettings(rank=16, alpha=32),
                micro_batch_tokens=2048, autocast="bf16", gradient_checkpointing=True)


def samples(tokenizer, n: int = 64) -> list[Sample]:
    """``n`` samples of ~200 prompt and ~40 response tokens, the same on every rank (seeded)."""
    rng = random.Random(0)
    vocab = tokenizer.vocab_size
    return [Sample(f"s{i}", tuple(rng.randrange(vocab) for _ in range(180 + i % 40)),
                   tuple(rng.randrange(vocab) for _ in range(20 + i % 30)), rng.uniform(-1.5, 1.5))
            for i in range(n)]


def main(out: str, checkpoint_dir: str) -> None:
    shard = join_process_group(600)
    cuda = torch.cuda.is_available()  # the CPU runs it too (a dry run of the code path, no memory figure)
    generator = HFGenerator("smollm2", device="cuda" if cuda else "cpu")
    learner = PPOLearner(generator, CFG, checkpoint_dir, seed=0, reference_source="smollm2", shard=shard)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    metrics, uri = learner.learn_now("policy", samples(generator.tokenizer), True, 1, None)
    seconds = time.perf_counter() - started
    if shard.rank == 0:
        with open(out, "a") as f:
            f.write(json.dumps({"world": shard.world, "seconds": seconds, "uri": uri, "metrics": metrics,
                                "peak_bytes": torch.cuda.max_memory_allocated() if cuda else None,
                                "gpu": torch.cuda.get_device_name() if cuda else "cpu"}) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
