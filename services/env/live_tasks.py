"""The env's live tasks: task candidates from the ingest service (``rla.ingest.candidate.<tenant>``,
durable ``env-live-candidates``) become slots of family ``live``.

A candidate's content goes to the KV bucket ``live_tasks`` under its content hash (create if
absent: the same failure twice is one task) and into the `LiveFamily` mirror; its slot
``live/<hash prefix>`` starts in split ``live_pending``, is rolled out G times as a candidate job,
and is admitted or dropped by `acceptance.live_verdict`. Every env replica refreshes its mirror
from the bucket, so any replica can serve any live task.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re

from nats.js.errors import KeyWrongLastSequenceError
from nats.js.kv import KeyValue
from prometheus_client import Counter
from rlanything.v1.env_pb2 import TaskSlot, TaskVersion
from rlanything.v1.ingest_pb2 import LiveTaskCandidate

from services.common.bus import CONNECTION_ERRORS, Delivery
from services.common.errors import InvalidEventError
from services.common.kv import live_entries
from services.env.families.live import LiveFamily, LiveTask, live_seed
from services.env.pool import TaskPool, slot_key

__all__ = ["LiveTasks", "live_slot_id", "is_heldout"]

log = logging.getLogger("rlanything.env.live")
LIVE_CANDIDATES = Counter("rla_env_live_candidates_total", "Live task candidates, by outcome (new, duplicate).",
                          ["outcome"])
_HASH = re.compile(r"^[0-9a-f]{64}$")


def live_slot_id(candidate_id: str) -> str:
    """``live/<first 16 hex digits>``."""
    return f"live/{candidate_id[:16]}"


def is_heldout(candidate_id: str, every: int) -> bool:
    """Every ``every``-th candidate (by hash) is held out: never trained on (pure)."""
    return every > 0 and int(candidate_id[:15], 16) % every == 0


def _task(c: LiveTaskCandidate) -> LiveTask:
    return LiveTask(c.candidate_id, c.prompt, c.reference, c.hint, c.task_type or "chat", c.tenant)


class LiveTasks:
    """Live task content (KV + the family's mirror) and their slots in the pool."""

    def __init__(self, kv: KeyValue, family: LiveFamily, pool: TaskPool, heldout_every: int = 10,
                 refresh_s: float = 2.0) -> None:
        self.kv = kv
        self.family = family
        self.pool = pool
        self.heldout_every = heldout_every
        self.refresh_s = refresh_s

    async def load(self) -> int:
        """Fill the family's mirror from the bucket; returns how many tasks it holds."""
        for entry in await live_entries(self.kv):
            self.family.add(_task(LiveTaskCandidate.FromString(entry.value)))
        return len(self.family.tasks)

    async def refresh_loop(self) -> None:
        """Reload the mirror every ``refresh_s`` seconds (tasks another replica stored); a reload that
        fails because NATS is slow or away is retried at the next one (the service's link watch
        decides when the process gives up on NATS)."""
        while True:
            await asyncio.sleep(self.refresh_s)
            try:
                await self.load()
            except CONNECTION_ERRORS as exc:
                log.warning("live task reload failed; retrying", extra={"error": f"{type(exc).__name__}: {exc}"})

    async def on_candidate(self, c: LiveTaskCandidate, delivery: Delivery) -> None:
        """Store a candidate once and give it a pending slot.

        Raises:
            InvalidEventError: no content hash, prompt or reference (dead-lettered).
        """
        if not _HASH.fullmatch(c.candidate_id) or not c.prompt or not c.reference:
            raise InvalidEventError(f"live task candidate {c.candidate_id[:20]!r}: needs a sha256 candidate_id, "
                                    "a prompt and a reference")
        try:
            await self.kv.create(c.candidate_id, c.SerializeToString())
            outcome = "new"
        except KeyWrongLastSequenceError:
            outcome = "duplicate"
        self.family.add(_task(c))
        slot_id = live_slot_id(c.candidate_id)
        slot = TaskSlot(slot_id=slot_id, family=self.family.name, split="live_pending", next_version=1,
                        active=TaskVersion(version=0, knobs={"hint": 0.0}, seed=live_seed(c.candidate_id),
                                           oracle_plan_length=1, parent_version=-1,
                                           metadata={"tenant": c.tenant, "task_type": c.task_type or "chat",
                                                     "candidate_id": c.candidate_id}))
        try:
            await self.pool.bucket.kv.create(slot_key(slot_id), slot.SerializeToString())
        except KeyWrongLastSequenceError:
            outcome = "duplicate"  # the slot exists: the same failure was seen before
        LIVE_CANDIDATES.labels(outcome).inc()
        log.info("live task candidate", extra={"slot_id": slot_id, "outcome": outcome, "tenant": c.tenant})

    async def add_variant(self, parent: LiveTask, prompt: str, reference: str, hint: str = "") -> tuple[int, str]:
        """Store a model-written variant of ``parent`` (same tenant and task type) like a candidate:
        in the bucket under its content hash (once) and in the mirror; returns (seed, content hash)."""
        digest = hashlib.sha256("\n".join(["variant", parent.tenant, parent.task_type, prompt, reference, hint])
                                .encode()).hexdigest()
        c = LiveTaskCandidate(tenant=parent.tenant, candidate_id=digest, task_type=parent.task_type, prompt=prompt,
                              reference=reference, hint=hint, source_trajectory_id=f"variant-of/{parent.candidate_id}")
        try:
            await self.kv.create(digest, c.SerializeToString())
        except KeyWrongLastSequenceError:
            pass  # the same variant was written before
        return self.family.add(_task(c)), digest

    def content(self, slot: TaskSlot) -> LiveTask | None:
        """The active version's task content (None when this process has not loaded it)."""
        return self.family.tasks.get(int(slot.active.seed))

    def heldout(self, slot: TaskSlot) -> bool:
        """Is this live slot one of the held-out ones?"""
        return is_heldout(slot.active.metadata.get("candidate_id", "0" * 64), self.heldout_every)

    def has_hint(self, slot: TaskSlot) -> bool:
        """Did the user give a correction to show as a hint?"""
        task = self.family.tasks.get(int(slot.active.seed))
        return bool(task and task.hint)
