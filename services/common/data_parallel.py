"""Data-parallel, sharded PPO updates: torch.distributed ranks with FSDP2 (`fully_shard`).

Every rank holds the whole round's samples (they are small next to a model) and draws the same
minibatch split; in each minibatch rank r trains the rows ``r, r + W, r + 2W, ...`` (W ranks). FSDP2
shards weights, gradients and AdamW state over the ranks and averages the gradients, so each rank
scales its loss by W: the update is the one a single process computes over the whole minibatch
(tests/integration/test_data_parallel.py compares the weights). Decisions that stop or undo a step
come from quantities every rank computes identically, so no rank can take a step another skips.

Source: PyTorch FSDP2 (`torch.distributed.fsdp.fully_shard`), gloo on CPU, NCCL on GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

__all__ = ["Shard", "current_shard", "all_sum", "shard_model"]


@dataclass(frozen=True)
class Shard:
    """This process's place among the data-parallel ranks."""

    rank: int
    world: int

    def rows(self, rows: torch.Tensor) -> torch.Tensor:
        """The rows of a minibatch (indices into the batch) this rank trains."""
        return rows[self.rank::self.world]


def current_shard() -> Shard:
    """Rank and world size of the initialised default process group; (0, 1) without one."""
    if dist.is_available() and dist.is_initialized():
        return Shard(dist.get_rank(), dist.get_world_size())
    return Shard(0, 1)


def all_sum(values: list[float], shard: Shard) -> list[float]:
    """``values`` summed over the ranks (float64 all-reduce); returned unchanged on one process."""
    if shard.world == 1:
        return values
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t)
    return [float(v) for v in t]


def shard_model(model: torch.nn.Module) -> torch.nn.Module:
    """Shard ``model`` in place with FSDP2: each decoder layer (``model.model.layers``, the
    transformers layout of Llama/Qwen2-style models) is one unit, the rest the root unit.

    Raises:
        RuntimeError: no process group is initialised.
        AttributeError: ``model`` has no ``model.layers``.
    """
    from torch.distributed.fsdp import fully_shard

    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("shard_model needs an initialised torch.distributed process group (torchrun)")
    for layer in model.model.layers:  # type: ignore[union-attr]  # transformers models keep their decoder layers here
        fully_shard(layer)
    fully_shard(model)
    return model
