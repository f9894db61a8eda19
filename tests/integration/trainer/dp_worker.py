"""One rank of a data-parallel PPO update, started by torchrun (tests/integration/trainer/test_data_parallel.py).

``python -m torch.distributed.run --nproc_per_node W tests/integration/trainer/dp_worker.py OUT`` trains the
tiny model of `dp_case` sharded with FSDP2 over W gloo ranks and rank 0 writes the full updated
state dict and the metrics to OUT (torch.save). ``... dp_worker.py OUT MODEL_DIR CKPT_DIR`` trains LoRA
adapters on the saved model MODEL_DIR with a `PPOLearner` instead, which checkpoints the adapter to
CKPT_DIR; rank 0 writes the metrics and the checkpoint's path to OUT. ``... CKPT_DIR resume`` first
resumes the v1 saved in CKPT_DIR (by any number of ranks) and trains v2.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from services.common.data_parallel import shard_model  # noqa: E402
from services.common.ppo_update import ppo_update  # noqa: E402
from tests.integration.trainer.dp_case import CFG, lora_learner, model, samples  # noqa: E402


def main_lora(out: str, model_dir: str, checkpoint_dir: str, resume: str = "") -> None:
    learner = lora_learner(model_dir, checkpoint_dir)
    version = 1
    if resume:  # go on from the v1 one process saved in CHECKPOINT_DIR: train v2
        learner.resume_now("policy", 1)
        version = 2
    resumed = learner.lineage[1]
    metrics, uri = learner.learn_now("policy", samples(), True, version, None)
    if dist.get_rank() == 0:
        torch.save({"metrics": metrics, "uri": uri, "world": dist.get_world_size(), "resumed": resumed,
                    "lineage": learner.lineage}, out)
    else:
        assert uri == "", f"rank {dist.get_rank()} wrote a checkpoint: {uri}"


def main(out: str, *lora: str) -> None:
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    if lora:
        main_lora(out, *lora)
        dist.destroy_process_group()
        return
    policy = shard_model(model())
    optimizer = torch.optim.AdamW(policy.parameters(), lr=CFG.lr)
    metrics = ppo_update(policy, optimizer, samples(), CFG, 0, reference=model(), seed=5)
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    full = get_model_state_dict(policy, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if dist.get_rank() == 0:
        torch.save({"state": full, "metrics": metrics, "world": dist.get_world_size()}, out)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
