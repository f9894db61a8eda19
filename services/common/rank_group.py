"""One trainer over several torchrun processes: rank 0 leads, the other ranks follow its commands.

Rank 0 runs the trainer as on one process: it alone consumes the sample events, decides when to
train and announces versions. Before each training or save it broadcasts the command (with the
round's samples) to the other ranks, so every rank enters the same collectives in the same order
(FSDP2's all-gathers and reduce-scatters, the trust region's sums, the state-dict gather); only rank
0 writes the checkpoint. While idle, rank 0 broadcasts a heartbeat every ``heartbeat_s`` seconds, so
a follower never waits in a collective longer than that and the collective timeout can stay short
enough to notice a dead rank. Any failure of a command breaks the group for good (the other ranks
may be stuck in a collective): the service then exits non-zero and is restarted with its group
(torchrun ``--max-restarts=0`` on Kubernetes); the trainer's stored batches make that safe.

Source: `torch.distributed.broadcast_object_list` for the commands; `services.common.data_parallel`
for the sharding.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch.distributed as dist

from services.common.algo.batching import Sample
from services.common.data_parallel import launched_world
from services.common.errors import ConfigError, ServiceFailedError
from services.common.runtime import Service
from services.common.trainer import PPOLearner

__all__ = ["Command", "run_command", "LeadingLearner", "follow", "follow_then_stop", "heartbeat_interval",
           "lead_or_follow", "require_trainer_role", "stop_followers"]

log = logging.getLogger("rlanything.ranks")


@dataclass(frozen=True)
class Command:
    """What every rank does next: ``learn`` (a PPO update, then a checkpoint), ``save`` (a checkpoint
    of the current weights), ``resume`` (load the saved state of announced ``version``), ``beat``
    (nothing: a heartbeat) or ``stop`` (leave the loop)."""

    kind: Literal["learn", "save", "resume", "beat", "stop"]
    role: str = ""
    samples: Sequence[Sample] = field(default_factory=tuple)
    recompute_old: bool = False
    version: int = 0
    latest_uri: str | None = None


def heartbeat_interval(collective_timeout_s: float) -> float:
    """Seconds between two heartbeats: a quarter of the collective timeout, at most 60 s."""
    return min(60.0, collective_timeout_s / 4)


def run_command(learner: PPOLearner, command: Command) -> tuple[dict[str, float], str]:
    """Carry out ``command`` on this rank; returns the metrics and the checkpoint's path ('' off rank 0
    and for a heartbeat).

    Raises:
        ValueError: ``command.kind`` is ``stop`` or unknown (a stop is handled by the loops).
    """
    if command.kind == "learn":
        return learner.learn_now(command.role, list(command.samples), command.recompute_old, command.version,
                                 command.latest_uri)
    if command.kind == "save":
        return {}, learner.save(command.role, command.version)
    if command.kind == "resume":
        learner.resume_now(command.role, command.version)
        return {}, ""
    if command.kind == "beat":
        return {}, ""
    raise ValueError(f"run_command: no action for a {command.kind!r} command")


def _broadcast(command: Command | None) -> Command:
    box: list[Command | None] = [command]
    dist.broadcast_object_list(box, src=0)
    if not isinstance(box[0], Command):
        raise ServiceFailedError(f"rank {dist.get_rank()}: rank 0 broadcast {type(box[0]).__name__}, not a Command")
    return box[0]


class LeadingLearner:
    """Rank 0's `Learner`: each call is broadcast to the other ranks, then run here as on one process.

    ``broken`` completes with the first failure (await it in a background task, so the service exits).
    """

    def __init__(self, learner: PPOLearner, heartbeat_s: float) -> None:
        self.learner = learner
        self.heartbeat_s = heartbeat_s
        self.broken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._lock = threading.Lock()
        """Commands are broadcast one at a time (training runs in a worker thread)."""
        self._stopped = False

    async def initial_uri(self, role: str) -> str:
        """Version 0 saved by rank 0 (every rank gathers its shards)."""
        return (await self._lead(Command("save", role, version=0)))[1]

    @property
    def lineage(self) -> tuple[str, str]:
        """Rank 0's learner's `PPOLearner.lineage`."""
        return self.learner.lineage

    async def resume(self, role: str, version: int) -> None:
        """Every rank loads the saved state of announced ``version`` (`PPOLearner.resume_now`)."""
        await self._lead(Command("resume", role, version=version))

    async def learn(self, role: str, samples: list[Sample], recompute_old: bool, version: int,
                    latest_uri: str | None) -> tuple[dict[str, float], str]:
        """One PPO update on every rank; the checkpoint rank 0 wrote."""
        return await self._lead(Command("learn", role, tuple(samples), recompute_old, version, latest_uri))

    async def heartbeats(self) -> None:
        """Broadcast a heartbeat every ``heartbeat_s`` seconds while no other command runs (a background
        task; returns only when cancelled or stopped)."""
        while not self._stopped:
            await asyncio.sleep(self.heartbeat_s)
            if not self._lock.locked():
                await self._lead(Command("beat"))

    async def watch(self) -> None:
        """Wait until the group breaks, then raise its error (a background task of the service).

        Raises:
            ServiceFailedError: a command failed on rank 0.
        """
        await self.broken

    async def stop(self) -> None:
        """Tell the other ranks to leave their loop (once; nothing when the group is broken). A rank that
        already stopped (they all get the SIGTERM) makes it fail: logged, not raised."""
        if self.broken.done() or self._stopped:
            return
        try:
            await asyncio.to_thread(self._lead_now, Command("stop"))
        except Exception as exc:  # noqa: BLE001 - stopping anyway
            log.warning("could not tell the other ranks to stop", extra={"error": repr(exc)})

    async def _lead(self, command: Command) -> tuple[dict[str, float], str]:
        try:
            return await asyncio.to_thread(self._lead_now, command)
        except Exception as exc:
            if not self.broken.done():
                self.broken.set_exception(ServiceFailedError(
                    f"the trainer's rank group broke on a {command.kind!r} command: {exc!r}"))
            raise

    def _lead_now(self, command: Command) -> tuple[dict[str, float], str]:
        with self._lock:
            if self._stopped:
                raise ServiceFailedError(f"a {command.kind!r} command after the rank group was stopped")
            _broadcast(command)
            if command.kind == "stop":
                self._stopped = True
                return {}, ""
            return run_command(self.learner, command)


def follow(learner: PPOLearner) -> int:
    """Ranks other than 0: run rank 0's commands until it broadcasts ``stop`` (blocking).

    Returns:
        How many learn and save commands ran.
    Raises:
        Whatever a collective raises when a rank dies or the collective timeout passes.
    """
    done = 0
    while True:
        command = _broadcast(None)
        if command.kind == "stop":
            return done
        run_command(learner, command)
        if command.kind != "beat":
            done += 1
            log.info("followed rank 0", extra={"command": command.kind, "version": command.version})


async def follow_then_stop(learner: PPOLearner) -> None:
    """`follow` in a worker thread, then stop this process as SIGTERM does (the service's background task)."""
    done = await asyncio.to_thread(follow, learner)
    log.info("rank 0 stopped the group", extra={"rank": dist.get_rank(), "commands": done})
    os.kill(os.getpid(), signal.SIGTERM)


def require_trainer_role(service: str, role: str, trains_weights: bool = True) -> None:
    """Check, at start-up, that a process started by torchrun on several ranks is a trainer of weights.

    Raises:
        ConfigError: ``WORLD_SIZE`` > 1 and ``role`` is not ``trainer`` (rollout workers and judges scale
            as replicas, not ranks), or the trainer has no local weights to shard (``trains_weights``).
    """
    world = launched_world()
    if world == 1:
        return
    if role != "trainer":
        raise ConfigError(f"{service}.role must be 'trainer' under torchrun (WORLD_SIZE={world}): only a trainer "
                          f"runs as several ranks; got {role!r}")
    if not trains_weights:
        raise ConfigError(f"{service}: a trainer without local weights (e.g. reward.backend oracle or openai) "
                          f"cannot run under torchrun (WORLD_SIZE={world}); start it as one process")


def lead_or_follow(service: Service, learner: PPOLearner) -> PPOLearner | LeadingLearner | None:
    """The learner ``service``'s trainer uses on this rank: ``learner`` itself on one process; on rank 0
    of several a `LeadingLearner` (its heartbeat and failure watch added to the service's background
    tasks); None on the other ranks, which follow rank 0 in a background task instead of consuming events.
    """
    if learner.shard.world == 1:
        return learner
    if learner.shard.rank > 0:
        service.background.append(asyncio.create_task(follow_then_stop(learner), name="rank-follower"))
        service.log.info("following rank 0", extra={"rank": learner.shard.rank, "world": learner.shard.world})
        return None
    leader = LeadingLearner(learner, heartbeat_interval(learner.ppo.collective_timeout_s))
    service.background += [asyncio.create_task(leader.watch(), name="rank-group-watch"),
                           asyncio.create_task(leader.heartbeats(), name="rank-heartbeat")]
    service.log.info("leading the trainer's ranks", extra={"world": learner.shard.world})
    return leader


async def stop_followers(learner: object) -> None:
    """At shutdown: release the following ranks when ``learner`` is rank 0's `LeadingLearner` (else nothing)."""
    if isinstance(learner, LeadingLearner):
        await learner.stop()
