"""The task pool, stored in a JetStream key-value bucket (one key per slot) so that an env
restart loses nothing: active versions, version history and pending candidates."""

from __future__ import annotations

from collections.abc import Mapping

import asyncio
import logging

from rlanything.v1.env_pb2 import TaskSlot, TaskVersion
from rlanything.v1.events_pb2 import TaskRef
from nats.js.errors import KeyWrongLastSequenceError

from services.common.config import EnvServiceConfig
from services.common.errors import InvalidArgumentError, NotFoundError
from services.common.kv import ProtoBucket
from services.env.disjoint import EvalInstanceError, eval_keys, eval_specs, seed_splits, slot_seed, train_slot_spec
from services.env.families.base import TaskFamily, TaskSpec
from services.env.slots import find_version, resolve_pending, with_pending

__all__ = ["TaskPool", "spec_of", "slot_key", "library_drift"]

log = logging.getLogger("rlanything.env.pool")


def slot_key(slot_id: str) -> str:
    """KV key of a slot id (KV keys may not contain '/')."""
    return slot_id.replace("/", ".")


def spec_of(family: str, version: TaskVersion) -> TaskSpec:
    """The `TaskSpec` of one stored task version."""
    return TaskSpec(family, dict(version.knobs), int(version.seed))


def library_drift(slots: list[TaskSlot], families: Mapping[str, TaskFamily]) -> list[str]:
    """One warning per family whose active tasks were built by another version of its library
    than the installed one (pure): the same knobs and seed may now build a different task."""
    out = []
    for name, family in sorted(families.items()):
        installed = family.metadata().get("library_version")
        built = sorted({s.active.metadata["library_version"] for s in slots if s.family == name
                        and s.active.metadata.get("library_version", installed) != installed})
        if built:
            n = sum(1 for s in slots if s.family == name and s.active.metadata.get("library_version") in built)
            out.append(f"{name}: {n} task(s) were built with {family.library} {', '.join(built)}, this process has "
                       f"{installed}; their seeds may build different tasks now (see TaskVersion.metadata)")
    return out


class TaskPool:
    """Slots of every family, in KV bucket ``bucket``; families build and check the tasks."""

    def __init__(self, bucket: ProtoBucket, families: Mapping[str, TaskFamily]) -> None:
        self.bucket = bucket
        self.families = families
        self.held_out: frozenset[str] = frozenset()
        self.held_out_specs: list[TaskSpec] = []
        """The run's held-out and OOD tasks (`disjoint.eval_specs`), set by `seed`."""
        """Instance keys of the run's held-out and OOD tasks (set by `seed`; `held_out_keys` waits for it)."""
        self._held_out_ready = asyncio.Event()

    def family(self, name: str) -> TaskFamily:
        """The family adapter ``name``.

        Raises:
            InvalidArgumentError: no such family in this pool.
        """
        try:
            return self.families[name]
        except KeyError:
            raise InvalidArgumentError(f"task family {name!r} is not served here; "
                                       f"families: {sorted(self.families)}") from None

    async def held_out_keys(self) -> frozenset[str]:
        """The instance keys of the run's held-out and OOD tasks (`services.env.disjoint`), once
        `seed` has computed them (waits until then)."""
        await self._held_out_ready.wait()
        return self.held_out

    async def held_out_of(self, family: str) -> list[TaskSpec]:
        """The held-out and OOD tasks of ``family`` (waits until `seed` has set them)."""
        await self._held_out_ready.wait()
        return [s for s in self.held_out_specs if s.family == family]

    async def seed(self, cfg: EnvServiceConfig, base_seed: int) -> int:
        """Create the configured seed slots that do not exist yet (idempotent); returns how many.

        First the evaluation keys (`disjoint.eval_keys` of every held-out and OOD task of the
        config and seed), then the slots: a train slot whose task is an evaluation instance gets
        the next derived seed instead (`disjoint.disjoint_instance`). Games are generated
        (``prepare``) in a worker thread, off the request path.

        Raises:
            InvalidArgumentError: a seed task is not solvable, or a family's train knobs draw
                nothing but evaluation instances (the message names the family and the knobs).
        """
        self.held_out_specs = eval_specs(cfg.families, base_seed)
        self.held_out = await asyncio.to_thread(eval_keys, self.families, self.held_out_specs)
        self._held_out_ready.set()
        created = redrawn = 0
        existing = set(await self.bucket.keys())
        for index, fam_cfg in enumerate(cfg.families):
            for split, count, knobs in seed_splits(fam_cfg):
                for i in range(count):
                    slot_id = f"{fam_cfg.type}/{split}-{i:04d}"
                    if slot_key(slot_id) in existing:
                        continue
                    spec = TaskSpec(fam_cfg.type, knobs, slot_seed(base_seed, split, i))
                    if split == "train":
                        try:
                            spec, redraws = await asyncio.to_thread(train_slot_spec, self.family(fam_cfg.type), fam_cfg.type,
                                                                    knobs, base_seed, i, self.held_out)
                        except EvalInstanceError as exc:
                            raise InvalidArgumentError(f"env.families[{index}] train slot {slot_id}: {exc}") from None
                        redrawn += redraws > 0
                    plan = await asyncio.to_thread(self._checked_plan_length, spec)
                    if plan is None:
                        raise InvalidArgumentError(f"seed task {slot_id} ({spec.key()}) is not solvable")
                    version = TaskVersion(version=0, knobs=spec.knobs, seed=spec.seed,
                                          oracle_plan_length=plan, parent_version=-1,
                                          metadata=self.family(fam_cfg.type).metadata())
                    slot = TaskSlot(slot_id=slot_id, family=fam_cfg.type, split=split, active=version,
                                    next_version=1)
                    try:
                        await self.bucket.kv.create(slot_key(slot_id), slot.SerializeToString())
                        created += 1
                    except KeyWrongLastSequenceError:
                        pass  # another env replica created it first
        log.info("evaluation instances kept out of training",
                 extra={"eval_instances": len(self.held_out), "train_slots_redrawn": redrawn})
        for warning in library_drift(await self.slots(), self.families):
            log.warning(warning)
        return created

    def _checked_plan_length(self, spec: TaskSpec) -> int | None:
        family = self.family(spec.family)
        family.validate(spec)
        family.prepare(spec)
        return family.oracle_plan_length(spec)

    def check_candidate(self, spec: TaskSpec) -> int | None:
        """Deployable and solvable? Builds the task (blocking) and returns its oracle plan length
        (None when it has no winning plan).

        Raises:
            InvalidArgumentError: knobs out of bounds; any library error while building propagates.
        """
        return self._checked_plan_length(spec)

    async def slots(self) -> list[TaskSlot]:
        """Every slot, sorted by id."""
        out = []
        for key in sorted(await self.bucket.keys()):
            slot, _ = await self.bucket.get(key)
            if slot is not None:
                out.append(slot)
        return out

    async def slot(self, slot_id: str) -> TaskSlot:
        """One slot.

        Raises:
            NotFoundError: no such slot.
        """
        slot, _ = await self.bucket.get(slot_key(slot_id))
        if slot is None:
            raise NotFoundError(f"task slot {slot_id!r} does not exist")
        return slot

    async def spec(self, ref: TaskRef) -> TaskSpec:
        """The task of ``ref`` (active, pending or historical version).

        Raises:
            NotFoundError: unknown slot or version.
        """
        slot = await self.slot(ref.slot_id)
        return spec_of(slot.family, find_version(slot, ref.version))

    async def add_candidate(self, slot_id: str, candidate: TaskVersion) -> TaskSlot:
        """Make ``candidate`` the slot's pending version (CAS); raises if one is pending."""
        return await self.bucket.update(slot_key(slot_id), lambda s: with_pending(self._must(s, slot_id), candidate))

    async def resolve(self, slot_id: str, version: int, accepted: bool) -> TaskSlot:
        """Accept (promote) or reject (drop) the slot's pending ``version`` (CAS)."""
        return await self.bucket.update(
            slot_key(slot_id), lambda s: resolve_pending(self._must(s, slot_id), version, accepted))

    async def apply_live(self, slot_id: str, split: str | None, hint: float | None) -> TaskSlot:
        """A live slot after its admission verdict (CAS): a new split, and/or a new active
        version with knob ``hint`` (the old one goes to the history)."""

        def update(s: TaskSlot | None) -> TaskSlot:
            new = TaskSlot()
            new.CopyFrom(self._must(s, slot_id))
            if split is not None:
                new.split = split
            if hint is not None:
                old = new.active
                version = TaskVersion()
                version.CopyFrom(old)
                version.version, version.parent_version = new.next_version, old.version
                version.knobs["hint"] = hint
                new.history.append(old)
                new.active.CopyFrom(version)
                new.next_version += 1
                new.has_acc = False
            return new

        return await self.bucket.update(slot_key(slot_id), update)

    async def record_acc(self, slot_id: str, acc: float, round_: int) -> TaskSlot:
        """Remember the active version's latest acc and round."""

        def update(s: TaskSlot | None) -> TaskSlot:
            new = TaskSlot()
            new.CopyFrom(self._must(s, slot_id))
            new.last_acc, new.last_round, new.has_acc = acc, round_, True
            return new

        return await self.bucket.update(slot_key(slot_id), update)

    @staticmethod
    def _must(slot: TaskSlot | None, slot_id: str) -> TaskSlot:
        if slot is None:
            raise NotFoundError(f"task slot {slot_id!r} does not exist")
        return slot
