"""A trainer's state across restarts: its trainable weights, AdamW state and step counts, saved with
every version, so that a restarted trainer goes on from the latest *announced* version.

Layout under ``<checkpoint_dir>/<role>/trainer/``: up to three slots, each a directory holding a
``meta.json`` (`SlotMeta`) and, unless ``fresh``, a `torch.distributed.checkpoint` (DCP) checkpoint of
``{"model": trainable weights, "optim": AdamW state}``:

* ``latest``: the state of the newest version saved (maybe not announced yet: a crash can fall
  between the save and the announcement);
* ``previous``: the one before it (so the announced version is always covered);
* ``incoming``: a save in progress (``meta.json`` is written last: a slot without it is ignored).

A version trained on no samples keeps the weights and the optimizer: it only moves ``through`` of
``latest``. A ``fresh`` slot (version 0, or a trainer that never stepped) has no DCP files: the
starting weights and a new optimizer are the state. DCP re-shards on load, so a trainer may
resume on another number of ranks.

Source: `torch.distributed.checkpoint` (``save``/``load``) and its ``state_dict`` helpers
(``get_state_dict``/``set_state_dict`` with ``ignore_frozen_params``: under LoRA only the adapters).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from services.common.data_parallel import Shard
from services.common.errors import ResumeError

__all__ = ["SlotMeta", "pick_slot", "state_root", "save_state", "keep_state", "load_state", "weights_sha256",
           "SLOTS"]

SLOTS = ("latest", "incoming", "previous")
"""Slot directories, in the order `pick_slot` prefers them among equals."""


@dataclass(frozen=True)
class SlotMeta:
    """What a slot holds: the state of versions ``version`` .. ``through`` (the same weights: the later
    ones trained on no samples), saved by ``world`` ranks; ``fresh`` = no files (the starting weights
    and a new optimizer); ``weights_sha256``: `weights_sha256` of its trainable weights."""

    version: int
    through: int
    world: int = 1
    fresh: bool = False
    weights_sha256: str = ""


def state_root(checkpoint_dir: str | Path, role: str) -> Path:
    """``<checkpoint_dir>/<role>/trainer``: where ``role``'s trainer keeps its slots."""
    return Path(checkpoint_dir) / role / "trainer"


def pick_slot(metas: Mapping[str, SlotMeta], announced: int) -> str | None:
    """The slot (pure) whose versions cover ``announced`` (``version <= announced <= through``), the
    newest such; None when none does."""
    covering = [(m.version, -SLOTS.index(name) if name in SLOTS else -len(SLOTS), name)
                for name, m in metas.items() if m.version <= announced <= m.through]
    return max(covering)[2] if covering else None


def weights_sha256(named: Iterable[tuple[str, torch.Tensor]]) -> str:
    """SHA-256 (hex) over tensors sorted by name: each name, dtype, shape and raw bytes. Two models
    with the same digest hold the same values bit for bit."""
    h = hashlib.sha256()
    for name, t in sorted(named, key=lambda kv: kv[0]):
        t = t.detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def read_metas(root: Path) -> dict[str, SlotMeta]:
    """The readable slots under ``root`` (a slot whose ``meta.json`` is missing or bad is skipped)."""
    out: dict[str, SlotMeta] = {}
    for name in SLOTS:
        try:
            out[name] = SlotMeta(**json.loads((root / name / "meta.json").read_text()))
        except (OSError, ValueError, TypeError):
            continue
    return out


def _write_meta(slot: Path, meta: SlotMeta) -> None:
    tmp = slot / "meta.json.tmp"
    tmp.write_text(json.dumps(asdict(meta)))
    tmp.replace(slot / "meta.json")


def _options(strict: bool = True):  # noqa: ANN202 - torch's StateDictOptions
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(ignore_frozen_params=True, strict=strict)


def _barrier(shard: Shard) -> None:
    if shard.world > 1:
        dist.barrier()


def save_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, root: Path, version: int, shard: Shard,
               digest: str) -> None:
    """Save the state of ``version`` as ``root/latest`` (the old ``latest`` becomes ``previous``). A
    collective on several ranks: every rank calls it, each writes its shards, rank 0 the meta.
    An optimizer that never stepped gives a ``fresh`` slot (no files).

    Raises:
        OSError: the directory cannot be written.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    incoming = root / "incoming"
    fresh = not optimizer.state
    if shard.rank == 0:
        shutil.rmtree(incoming, ignore_errors=True)
        incoming.mkdir(parents=True)
    _barrier(shard)
    if not fresh:
        model_sd, optim_sd = get_state_dict(model, optimizer, options=_options())
        with warnings.catch_warnings():  # "assuming the intent is to save in a single process": it is
            warnings.filterwarnings("ignore", message=".*single process.*")
            dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=incoming)
    _barrier(shard)
    if shard.rank == 0:
        _write_meta(incoming, SlotMeta(version, version, shard.world, fresh, digest))
        shutil.rmtree(root / "previous", ignore_errors=True)
        if (root / "latest").exists():
            (root / "latest").rename(root / "previous")
        incoming.rename(root / "latest")
    _barrier(shard)


def keep_state(root: Path, version: int, shard: Shard) -> None:
    """Version ``version`` was made without a step: ``latest`` covers it too (rank 0 rewrites its meta).
    Without a ``latest`` slot (a run saved by an earlier release) nothing is written."""
    if shard.rank != 0:
        return
    meta = read_metas(root).get("latest")
    if meta is not None and meta.through < version:
        _write_meta(root / "latest", SlotMeta(meta.version, version, meta.world, meta.fresh, meta.weights_sha256))


def load_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, root: Path, announced: int, role: str,
               shard: Shard) -> SlotMeta:
    """Load the state covering version ``announced`` into ``model`` and ``optimizer`` (every rank calls
    it); slots of versions never announced (newer than ``announced``) are dropped, so the next save
    starts from a clean ``latest``. Returns the slot's meta.

    Raises:
        ResumeError: no slot covers ``announced`` (the message lists what was found), or its checkpoint
            does not fit the model (another LoRA rank or target modules, another model).
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    metas = read_metas(root)
    name = pick_slot(metas, announced)
    if name is None:
        found = ", ".join(f"{n}: v{m.version}..v{m.through}" for n, m in metas.items()) or "nothing"
        raise ResumeError(f"{role} trainer: cannot resume from the announced version v{announced}: no saved trainer "
                          f"state covers it under {root} (found {found}). The state (trainable weights, AdamW state, "
                          f"step counts) is saved with each version; it is missing when the checkpoint directory "
                          f"({role}.checkpoint_dir) was lost or another one is configured. Point {role}.checkpoint_dir "
                          f"at the run's directory, or start a new run.")
    meta = metas[name]
    if not meta.fresh:
        model_sd, optim_sd = get_state_dict(model, optimizer, options=_options())
        state: dict[str, Any] = {"model": model_sd, "optim": optim_sd}
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*single process.*")
                dcp.load(state, checkpoint_id=root / name)
        except (Exception, CheckpointException) as exc:  # DCP's (a BaseException) names missing keys and shapes
            raise ResumeError(f"{role} trainer: the saved state {root / name} (v{meta.version}) does not fit the "
                              f"model being trained (another model, or another ppo.lora rank or target_modules?): "
                              f"{exc}"[:2000]) from exc
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"],
                       options=_options(strict=False))  # frozen weights are not in it; trainable ones were checked
    _barrier(shard)
    if shard.rank == 0:
        for other, m in metas.items():
            if m.version > announced:
                shutil.rmtree(root / other, ignore_errors=True)
        if name != "latest" and not (root / "latest").exists():
            (root / name).rename(root / "latest")
    _barrier(shard)
    return meta
