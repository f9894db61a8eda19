"""Versioned checkpoints: save a Hugging Face directory, announce it, find the latest.

A version announcement (`ModelVersion`) carries the version number, the directory (a shared
volume in Kubernetes, the run directory locally) and a SHA-256 of the weight files. It is
published on `rla.models.<role>` and kept in the KV bucket ``models`` (key = role) so that a
worker that starts later, or restarts, finds the latest version without replaying the stream.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from rlanything.v1.events_pb2 import ModelVersion

from services.common.bus import EventBus
from services.common.kv import ProtoBucket
from services.common.rounds import ROLE_ENUM, model_version_id
from services.common.models.loading import checkpoint_sha256
from services.common.streams import Subjects
from services.common.topology import Buckets

__all__ = ["ROLES", "save_checkpoint", "VersionStore", "Reloadable"]

ROLES = {"policy": (ROLE_ENUM["policy"], Subjects.MODELS_POLICY),
         "reward": (ROLE_ENUM["reward"], Subjects.MODELS_REWARD)}


def save_checkpoint(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, root: str | Path, role: str, version: int,
                    state_dict: dict[str, torch.Tensor] | None = None) -> Path:
    """Save ``model`` and ``tokenizer`` to ``root/<role>/v<version>`` atomically (temp dir + rename).

    ``state_dict``: the weights to write instead of the model's own (a sharded model's gathered
    `services.common.data_parallel.full_state_dict`); a LoRA model writes its adapter's part of it.
    """
    out = Path(root) / role / f"v{version}"
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    if state_dict is None:
        model.save_pretrained(tmp)
    else:
        model.save_pretrained(tmp, state_dict=state_dict)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


class Reloadable(Protocol):
    """A model that serves one version at a time and can switch (a generator, a judge)."""

    @property
    def model_version(self) -> int: ...

    def load_version(self, path: str, version: int) -> None: ...


class VersionStore:
    """Latest model versions per role (KV bucket ``models``) and their announcements."""

    def __init__(self, bus: EventBus, bucket: ProtoBucket) -> None:
        self.bus = bus
        self.bucket = bucket

    @classmethod
    async def open(cls, bus: EventBus) -> "VersionStore":
        """Open (or create) the ``models`` bucket."""
        return cls(bus, await ProtoBucket.open(bus.js, Buckets.MODELS.name(), ModelVersion,
                                                    replicas=bus.nats_cfg.stream_replicas))

    async def latest(self, role: str) -> ModelVersion | None:
        """The newest announced version of ``role`` ("policy" or "reward"), or None."""
        value, _ = await self.bucket.get(role)
        return value

    async def load_newer(self, role: str, model: Reloadable) -> tuple[ModelVersion, float] | None:
        """Load the latest version of ``role`` into ``model`` (in a worker thread) when it is newer
        than the one ``model`` serves; returns it and its lag (seconds from announcement to loaded),
        or None when there is nothing newer."""
        latest = await self.latest(role)
        if latest is None or latest.version <= model.model_version:
            return None
        await asyncio.to_thread(model.load_version, latest.uri, int(latest.version))
        return latest, max(0.0, time.time() - latest.published_unix_s)

    async def announce(self, role: str, version: int, uri: str | Path, trained_on_round: int,
                       metrics: dict[str, float] | None = None, batch_keys: Sequence[str] = (),
                       lineage: tuple[str, str] = ("", "")) -> ModelVersion:
        """Publish ``rla.models.<role>`` (msg id ``<role>/v<version>``) and record it as the latest;
        ``batch_keys``: the stored sample batches it was trained on; ``lineage``: the digests of the
        trainable weights it started from and ended with (`services.common.trainer_state.weights_sha256`)."""
        enum, subject = ROLES[role]
        event = ModelVersion(role=enum, version=version, uri=str(uri), sha256=checkpoint_sha256(uri),
                             trained_on_round=trained_on_round, published_unix_s=time.time(),
                             metrics={k: v for k, v in (metrics or {}).items() if v == v},  # drop NaN
                             batch_keys=list(batch_keys), start_sha256=lineage[0], weights_sha256=lineage[1])
        await self.bus.publish(subject, event, msg_id=model_version_id(role, version))

        def newer(current: ModelVersion | None) -> ModelVersion:
            return event if current is None or version >= current.version else current

        await self.bucket.update(role, newer)
        return event
