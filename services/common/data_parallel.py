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

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

__all__ = ["Shard", "current_shard", "all_sum", "shard_model", "join_process_group", "launched_world",
           "full_state_dict", "decoder_layers"]


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


def decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The decoder layers of a transformers causal LM (``model.model.layers`` in Llama/Qwen2-style
    models; ``base_model.model.model.layers`` once peft wrapped it with LoRA adapters).

    Raises:
        AttributeError: ``model`` has no ``ModuleList`` named ``layers``.
    """
    for name, module in model.named_modules():
        if name.split(".")[-1] == "layers" and isinstance(module, torch.nn.ModuleList):
            return module
    raise AttributeError(f"{type(model).__name__} has no ModuleList named 'layers' to shard layer by layer")


def shard_model(model: torch.nn.Module) -> torch.nn.Module:
    """Shard ``model`` in place with FSDP2: each decoder layer (`decoder_layers`) is one unit, the rest
    the root unit. A LoRA-wrapped model shards the same way: frozen base weights and trainable adapters
    share a unit (FSDP2 keeps ``requires_grad`` per parameter). Create the optimizer after this call
    (the parameters become DTensors).

    Raises:
        RuntimeError: no process group is initialised.
        AttributeError: ``model`` has no decoder layers (`decoder_layers`).
    """
    from torch.distributed.fsdp import fully_shard

    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("shard_model needs an initialised torch.distributed process group (torchrun)")
    for layer in decoder_layers(model):
        fully_shard(layer)
    fully_shard(model)
    return model


def launched_world() -> int:
    """The world size torchrun gave this process (its ``WORLD_SIZE`` variable; 1 without torchrun).

    Raises:
        ValueError: ``WORLD_SIZE`` is not a positive integer.
    """
    raw = os.environ.get("WORLD_SIZE", "1")
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"WORLD_SIZE must be a positive integer (set by torchrun), got {raw!r}")
    return int(raw)


def join_process_group(timeout_s: float) -> Shard:
    """Join the process group torchrun describes (``WORLD_SIZE``, ``RANK``, ``MASTER_ADDR``/``PORT``):
    NCCL when CUDA is available (each process on ``cuda:LOCAL_RANK``), else gloo. ``timeout_s``
    bounds every collective, so it must exceed the longest wait between two trainings (a follower
    waits in a broadcast for the leader's next command). Without torchrun: ``Shard(0, 1)``, no group.

    Source: `torch.distributed.init_process_group` (env:// rendezvous).
    """
    if launched_world() == 1:
        return Shard(0, 1)
    if not dist.is_initialized():
        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl" if cuda else "gloo", timeout=timedelta(seconds=timeout_s))
    return current_shard()


def full_state_dict(model: torch.nn.Module, shard: Shard) -> dict[str, torch.Tensor]:
    """``model``'s whole state dict on CPU, gathered from every rank's shards (a collective: every rank
    calls it). Rank 0 gets every tensor whole (under LoRA, the adapters too); the other ranks an empty
    dict. Tied parameters map to one tensor, as in ``model.state_dict()``, so a checkpoint stores them
    once. On one process: the model's own state dict.

    Source: `torch.distributed.checkpoint.state_dict.get_model_state_dict` (``full_state_dict``,
    ``cpu_offload``).
    """
    if shard.world == 1:
        return model.state_dict()
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    out = {name: value for name, value in full.items() if isinstance(value, torch.Tensor)}
    first: dict[int, str] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in first and name in out and first[id(param)] in out:
            out[name] = out[first[id(param)]]  # tied (e.g. lm_head and the embeddings): one tensor again, saved once
        first.setdefault(id(param), name)
    return out
