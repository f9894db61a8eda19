"""The ingest shell: tenants, redaction at first touch, durable episodes in KV, the INGEST stream.

Used by both front doors (`http_api`, `grpc_service`). Every write is idempotent: the stream
publish carries a stable ``Nats-Msg-Id`` (``<tenant>/<episode>/<revision>``,
``<tenant>/fb/<feedback>``, ``<tenant>/<episode>/settled``) and the record is changed by
compare-and-set, so a retry after a crash at any point stores each thing once. Nothing raw is
stored, published or logged: texts are redacted before the first write, user ids are HMACs.

Subjects: ``rla.ingest.episode.<tenant>`` (IngestEpisode), ``rla.ingest.feedback.<tenant>``
(Feedback), ``rla.ingest.settled.<tenant>`` (SettledEpisode), ``rla.ingest.candidate.<tenant>``
(LiveTaskCandidate: a real failure with a reference, `candidates.task_candidate`), and at settling the episode's
`Trajectory` on ``rla.traj.live.completed.<tenant>.<episode>`` (`trajectories.to_trajectory`: one step per
assistant turn, captured completions from ``rla.ingest.completion.<tenant>.<episode>`` joined in).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError as JsNotFoundError
from nats.js.kv import KeyValue
from rlanything.v1.ingest_pb2 import (CapturedCompletion, EpisodeRecord, EpisodesErased, EpisodeStatus, EraseUserResponse,
                                      Feedback, IngestAck, IngestEpisode, PurgeTenantResponse, SettledEpisode)

from services.common.bus import CONNECTION_ERRORS, Delivery, EventBus
from services.common.erase import erase_subject
from services.common.errors import InvalidEventError
from services.common.config import IngestServiceConfig
from services.common.kv import ProtoBucket, escape_id, live_entries, open_bucket
from services.common.redaction import RedactionError, RegexRedactor
from services.common.streams import Subjects
from services.common.topology import Buckets
from services.ingest.episodes import (IngestError, advance, decide_upsert, new_record, place_feedback,
                                      redact_episode, redact_feedback, redactions_added, status_of, user_hash, validate_episode,
                                      validate_feedback)
from services.ingest.telemetry import (CANDIDATES, CAPTURES, ERASED, FEEDBACK_DELAY, LIVE_TURNS, OPEN_EPISODES, REDACTIONS,
                                       REFUSED, REQUESTS, SETTLED)
from services.ingest.candidates import task_candidate
from services.ingest.trajectories import live_trajectory_id, to_trajectory

__all__ = ["IngestShell"]

log = logging.getLogger("rlanything.ingest")
Status = IngestAck.Status
State = EpisodeStatus.State
_CAS_TRIES = 10


def _count_redactions(tenant: str, counts: dict[str, int]) -> None:
    """Add stored findings to ``rla_ingest_redactions_total`` (``tenant``: a configured tenant name,
    so the label's values are bounded by the config)."""
    for kind, n in counts.items():
        REDACTIONS.labels(tenant, kind).inc(n)


def _status_name(status: int) -> str:
    return IngestAck.Status.Name(status).removeprefix("STATUS_").lower()


_SWEEP_RETRIED: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, KeyWrongLastSequenceError)
"""Errors a sweep logs and retries at the next one: NATS slow or away, or a record changed meanwhile."""


def msg_id(*parts: object) -> str:
    """A JetStream message id (``Nats-Msg-Id``) from its parts; ``parts[1]`` is the tenant's erasure
    count, written only once there was an erasure (ids from before any erasure stay as they were)."""
    head, epoch, *rest = parts
    return "/".join(str(p) for p in ([head] if head else []) + ([f"e{epoch}"] if epoch else []) + rest)


class IngestShell:
    """Everything the ingest API does, over one NATS connection (see the module docstring)."""

    def __init__(self, cfg: IngestServiceConfig, bus: EventBus, episodes: ProtoBucket, orphans: ProtoBucket | None,
                 captures: ProtoBucket | None = None, clock: Callable[[], float] = time.time,
                 epochs: KeyValue | None = None) -> None:
        self.cfg = cfg
        self.epochs = epochs
        """Tenant → its erasure count (KV ``<episodes_bucket>_erasures``): part of every message id, so that
        an episode posted again after its erasure is published again, not dropped as a duplicate."""
        self.bus = bus
        self.episodes = episodes
        self.orphans = orphans
        self.captures = captures
        self.clock = clock
        self.redactor = RegexRedactor(cfg.redaction.patterns, cfg.redaction.deny, cfg.redaction.phone_regions)
        self._keys = cfg.tenant_keys()
        self.open_counts: Counter[str] = Counter()

    @classmethod
    async def open(cls, cfg: IngestServiceConfig, bus: EventBus) -> "IngestShell":
        """Open (or create) the episode and orphan-feedback buckets."""
        episodes = await ProtoBucket.open(bus.js, cfg.episodes_bucket, EpisodeRecord, replicas=bus.nats_cfg.stream_replicas)
        orphans = None
        if cfg.orphan_feedback_wait_s > 0:
            kv = await open_bucket(bus.js, cfg.feedback_bucket, ttl_s=cfg.orphan_feedback_wait_s, replicas=bus.nats_cfg.stream_replicas)
            orphans = ProtoBucket(kv, Feedback)
        wait_s = cfg.idle_close_s + cfg.settle_window_s + cfg.orphan_feedback_wait_s
        captures = ProtoBucket(await open_bucket(bus.js, cfg.captures_bucket, ttl_s=wait_s, replicas=bus.nats_cfg.stream_replicas), CapturedCompletion)
        epochs = await open_bucket(bus.js, Buckets.INGEST_ERASURES.name(episodes_bucket=cfg.episodes_bucket),
                                   replicas=bus.nats_cfg.stream_replicas)
        return cls(cfg, bus, episodes, orphans, captures, epochs=epochs)

    # ---- erasure epochs -------------------------------------------------------------------------

    async def _epoch(self, tenant: str) -> tuple[int, int]:
        """The tenant's erasure count and its KV revision (0, 0 before any erasure)."""
        if self.epochs is None:
            return 0, 0
        try:
            entry = await self.epochs.get(tenant)
        except KeyNotFoundError:
            return 0, 0
        return int(entry.value or b"0"), int(entry.revision or 0)

    async def _next_epoch(self, tenant: str) -> int:
        """Count one more erasure for ``tenant`` (compare-and-set, retried); returns the new count."""
        if self.epochs is None:
            return 0
        for _ in range(_CAS_TRIES):
            epoch, revision = await self._epoch(tenant)
            try:
                if revision:
                    await self.epochs.update(tenant, str(epoch + 1).encode(), last=revision)
                else:
                    await self.epochs.create(tenant, str(epoch + 1).encode())
                return epoch + 1
            except KeyWrongLastSequenceError:  # another replica counted one meanwhile
                continue
        raise RuntimeError(f"could not count an erasure for tenant {tenant} in {_CAS_TRIES} tries")

    async def _announce_erased(self, tenant: str, records: list[EpisodeRecord]) -> None:
        """Count the erasure and publish `EpisodesErased` so the judge, the critic and the trainers
        forget what they keep of the erased episodes."""
        epoch = await self._next_epoch(tenant)
        if records:
            await self.bus.publish(f"{Subjects.INGEST_ERASED}.{tenant}", EpisodesErased(
                tenant=tenant, episode_ids=[r.episode.episode_id for r in records],
                trajectory_ids=[live_trajectory_id(tenant, r.episode.episode_id, r.erasure_epoch) for r in records],
                erasure_epoch=epoch), msg_id=f"erased/{tenant}/{epoch}")

    # ---- captures -----------------------------------------------------------------------------

    def _capture_prefix(self, tenant: str, episode_id: str) -> str:
        return f"{self._key(tenant, episode_id)}."

    async def on_capture(self, capture: CapturedCompletion, delivery: Delivery) -> None:
        """Keep a captured completion (already redacted by the policy) until its episode settles.

        Raises:
            InvalidEventError: an unknown tenant, or no episode or completion id (dead-lettered).
        """
        if capture.tenant not in self.cfg.tenants or not capture.episode_id or not capture.completion_id:
            raise InvalidEventError(f"capture of tenant {capture.tenant!r}, episode {capture.episode_id!r}, completion "
                                    f"{capture.completion_id!r}: needs a configured tenant and both ids")
        if self.captures is not None:
            key = self._capture_prefix(capture.tenant, capture.episode_id) + escape_id(capture.completion_id)
            await self.captures.put(key, capture)
            CAPTURES.labels("stored").inc()

    async def _captures_of(self, tenant: str, episode_id: str) -> dict[str, CapturedCompletion]:
        if self.captures is None:
            return {}
        entries = await live_entries(self.captures.kv, key_prefix=self._capture_prefix(tenant, episode_id))
        found = [CapturedCompletion.FromString(e.value) for e in entries]
        return {c.completion_id: c for c in found}

    async def _drop_captures(self, tenant: str, episode_id: str, completion_ids: list[str]) -> None:
        if self.captures is not None:
            for cid in completion_ids:
                await self.captures.kv.purge(self._capture_prefix(tenant, episode_id) + escape_id(cid))

    # ---- auth ---------------------------------------------------------------------------------

    def tenant_of(self, bearer: str | None, claimed: str = "") -> str:
        """The tenant whose key is ``bearer``.

        Raises:
            IngestError: 401 for a missing or unknown key; 403 when ``claimed`` names another tenant.
        """
        tenant = self._keys.get(bearer or "")
        if tenant is None:
            REFUSED.labels("unknown_tenant").inc()
            raise IngestError(401, "unknown tenant key: send Authorization: Bearer <key of a tenant in "
                                   "ingest.tenants>", "authorization")
        if claimed and claimed != tenant:
            REFUSED.labels("tenant_mismatch").inc()
            raise IngestError(403, f"tenant {claimed!r} in the body does not match the key's tenant", "tenant")
        return tenant

    def _secret(self, tenant: str) -> str:
        return self.cfg.tenants[tenant].resolved_secret() or tenant

    @staticmethod
    def _key(tenant: str, episode_id: str) -> str:
        return f"{tenant}.{escape_id(episode_id)}"

    # ---- episodes -----------------------------------------------------------------------------

    async def record_episode(self, tenant: str, ep: IngestEpisode) -> IngestAck:
        """Validate, redact and store one revision of an episode.

        Raises:
            IngestError: 422/413 (the field), 403 without consent, 409 for a changed revision,
                429 over ``max_open_episodes``, 503 when redaction failed.
        """
        try:
            validate_episode(ep, self.cfg.max_messages, self.cfg.max_episode_bytes)
        except IngestError as exc:
            REFUSED.labels("too_large" if exc.status == 413 else "invalid").inc()
            raise
        if not ep.consent.training:
            REFUSED.labels("no_consent").inc()
            raise IngestError(403, "consent.training is false: nothing of this episode is stored", "consent.training")
        ep.tenant = tenant
        try:
            red = redact_episode(ep, self.redactor)
        except RedactionError:
            REFUSED.labels("redaction_failed").inc()
            raise IngestError(503, "redaction failed; nothing was stored (retry later)", None) from None
        uhash = user_hash(self._secret(tenant), ep.user_ref)
        key = self._key(tenant, ep.episode_id)
        for attempt in range(_CAS_TRIES):
            record, revision = await self.episodes.get(key)
            assert record is None or isinstance(record, EpisodeRecord)
            try:
                status = decide_upsert(record, red)
            except IngestError:
                REFUSED.labels("conflict").inc()
                raise
            if status != Status.STATUS_ACCEPTED:
                REQUESTS.labels(tenant, "episode", _status_name(status)).inc()
                return IngestAck(status=status, episode_id=ep.episode_id, revision=red.revision)  # type: ignore[arg-type]  # protobuf enum fields take their int values
            if record is None and self.open_counts[tenant] >= self.cfg.max_open_episodes:
                REFUSED.labels("too_many_open").inc()
                raise IngestError(429, f"tenant {tenant} has {self.open_counts[tenant]} open episodes "
                                       f"(ingest.max_open_episodes={self.cfg.max_open_episodes}); retry later")
            now = self.clock()
            epoch = record.erasure_epoch if record is not None else (await self._epoch(tenant))[0]
            ack = await self.bus.publish(f"{Subjects.INGEST_EPISODE}.{tenant}", red,
                                         msg_id=msg_id(tenant, epoch, escape_id(ep.episode_id), str(red.revision)))
            new = new_record(record, red, now, self.cfg.settle_window_s, self.cfg.retention_days, uhash)
            new.erasure_epoch = epoch
            new.stream_seqs.append(ack.seq)
            orphans = await self._orphans_of(tenant, ep.episode_id) if record is None else []
            for fb in orphans:
                placed, with_fb = place_feedback(new, fb)
                if with_fb is not None:
                    new = with_fb
                    FEEDBACK_DELAY.observe(max(0.0, fb.created_unix_s - now) if fb.created_unix_s else 0.0)
                REQUESTS.labels(tenant, "feedback", _status_name(placed)).inc()
            try:
                if revision == 0:
                    await self.episodes.kv.create(key, new.SerializeToString())
                else:
                    await self.episodes.kv.update(key, new.SerializeToString(), last=revision)
            except KeyWrongLastSequenceError:
                if attempt == _CAS_TRIES - 1:
                    raise
                continue
            if record is None:
                self.open_counts[tenant] += 1
            for fb in orphans:
                await self._drop_orphan(tenant, fb)
            _count_redactions(tenant, redactions_added(record, red))
            REQUESTS.labels(tenant, "episode", "accepted").inc()
            log.info("episode stored", extra={"tenant": tenant, "episode": ep.episode_id, "revision": red.revision,
                                              "state": State.Name(new.state), "redactions": dict(red.redactions)})
            return IngestAck(status=Status.STATUS_ACCEPTED, episode_id=ep.episode_id, revision=red.revision)
        raise AssertionError("unreachable")

    # ---- feedback -----------------------------------------------------------------------------

    async def record_feedback(self, tenant: str, fb: Feedback) -> IngestAck:
        """Attach feedback to its episode, keep it for an episode not seen yet, or count it late.

        Raises:
            IngestError: 422 naming the field, 404 for an unseen episode when buffering is off,
                503 when redaction failed.
        """
        try:
            validate_feedback(fb)
        except IngestError:
            REFUSED.labels("invalid").inc()
            raise
        fb.tenant = tenant
        try:
            red, found = redact_feedback(fb, self.redactor)
        except RedactionError:
            REFUSED.labels("redaction_failed").inc()
            raise IngestError(503, "redaction failed; nothing was stored (retry later)", None) from None
        if red.created_unix_s == 0:
            red.created_unix_s = self.clock()
        key = self._key(tenant, fb.episode_id)
        for attempt in range(_CAS_TRIES):
            record, revision = await self.episodes.get(key)
            assert record is None or isinstance(record, EpisodeRecord)
            status, new = place_feedback(record, red)
            if status == Status.STATUS_BUFFERED:
                if self.orphans is None:
                    raise IngestError(404, f"episode {fb.episode_id!r} has not been posted "
                                           "(ingest.orphan_feedback_wait_s is 0: feedback is not kept)", "episode_id")
                await self.orphans.put(f"{key}.{escape_id(fb.feedback_id)}", red)
                _count_redactions(tenant, found)
            if new is None or record is None:
                REQUESTS.labels(tenant, "feedback", _status_name(status)).inc()
                return IngestAck(status=status, episode_id=fb.episode_id)  # type: ignore[arg-type]  # protobuf enum fields take their int values
            ack = await self.bus.publish(f"{Subjects.INGEST_FEEDBACK}.{tenant}", red,
                                         msg_id=msg_id(tenant, record.erasure_epoch, "fb", escape_id(fb.feedback_id)))
            new.stream_seqs.append(ack.seq)
            try:
                await self.episodes.kv.update(key, new.SerializeToString(), last=revision)
            except KeyWrongLastSequenceError:
                if attempt == _CAS_TRIES - 1:
                    raise
                continue
            _count_redactions(tenant, found)  # stored once: applied, or late (kept, never trained on)
            if status == Status.STATUS_APPLIED:
                FEEDBACK_DELAY.observe(max(0.0, red.created_unix_s - record.episode.received_unix_s))
            REQUESTS.labels(tenant, "feedback", _status_name(status)).inc()
            return IngestAck(status=status, episode_id=fb.episode_id, revision=record.episode.revision)  # type: ignore[arg-type]  # protobuf enum fields take their int values
        raise AssertionError("unreachable")

    async def _orphans_of(self, tenant: str, episode_id: str) -> list[Feedback]:
        if self.orphans is None:
            return []
        entries = await live_entries(self.orphans.kv, key_prefix=f"{self._key(tenant, episode_id)}.")
        return [Feedback.FromString(e.value) for e in entries]

    async def _drop_orphan(self, tenant: str, fb: Feedback) -> None:
        if self.orphans is not None:
            await self.orphans.kv.purge(f"{self._key(tenant, fb.episode_id)}.{escape_id(fb.feedback_id)}")

    # ---- reading, erasure, settling --------------------------------------------------------------

    async def get_episode(self, tenant: str, episode_id: str) -> EpisodeStatus:
        """State and counts of one episode (no content).

        Raises:
            IngestError: 422 for an empty id; 404 when the episode is not stored (never posted,
                erased or expired).
        """
        if not episode_id:
            raise IngestError(422, "episode_id must not be empty", "episode_id")
        record, _ = await self.episodes.get(self._key(tenant, episode_id))
        if record is None:
            raise IngestError(404, f"episode {episode_id!r} is not stored for tenant {tenant}", "episode_id")
        assert isinstance(record, EpisodeRecord)
        return status_of(record)

    async def _erase(self, key: str, record: EpisodeRecord) -> int:
        """Delete one episode everywhere it is held; returns the stream messages deleted."""
        deleted = 0
        for stream, seqs in (("INGEST", record.stream_seqs), ("TRAJ", record.traj_seqs)):
            for seq in seqs:
                try:
                    if await self.bus.js.delete_msg(stream, seq):
                        deleted += 1
                except JsNotFoundError:
                    pass  # already gone (the stream's own max_age, or an earlier erasure)
        tenant, episode_id = record.episode.tenant, record.episode.episode_id
        ep = escape_id(episode_id)  # one subject per episode: its captures, and its judged trajectory
        for stream, subject in (("INGEST", f"{Subjects.INGEST_COMPLETION}.{tenant}.{ep}"),
                                ("TRAJ", f"{Subjects.TRAJ_LIVE_JUDGED}.{tenant}.{ep}"),
                                ("TRAJ", f"{Subjects.TRAJ_LIVE_SHADOW}.{tenant}.{ep}.>")):
            deleted += await erase_subject(self.bus.js, stream, subject)
        await self._drop_captures(tenant, episode_id, list(await self._captures_of(tenant, episode_id)))
        await self.episodes.kv.purge(key)  # KV streams deny per-message deletes: a purge (see the README)
        return deleted

    async def erase_user(self, tenant: str, user_ref: str) -> EraseUserResponse:
        """Delete every stored episode of ``user_ref`` in ``tenant``: its record and its INGEST
        stream messages (episode revisions, feedback, the settled hand-off).

        Raises:
            IngestError: 422 when ``user_ref`` is empty.
        """
        if not user_ref:
            raise IngestError(422, "user_ref must not be empty", "user_ref")
        uhash = user_hash(self._secret(tenant), user_ref)
        erased: list[EpisodeRecord] = []
        deleted = 0
        for entry in await live_entries(self.episodes.kv, key_prefix=f"{tenant}."):
            record = EpisodeRecord.FromString(entry.value)
            if record.user_hash == uhash:
                deleted += await self._erase(entry.key, record)
                erased.append(record)
        if erased:
            await self._announce_erased(tenant, erased)
        episodes = len(erased)
        ERASED.labels("user").inc(episodes)
        log.info("user erased", extra={"tenant": tenant, "episodes": episodes, "messages": deleted})
        return EraseUserResponse(episodes_erased=episodes, messages_deleted=deleted)

    async def purge_tenant(self, tenant: str) -> PurgeTenantResponse:
        """Delete everything stored for ``tenant``: its subjects on the INGEST and TRAJ streams
        (episodes, feedback, settled hand-offs, captures, live and judged live trajectories, shadow
        judges' votes on them) and
        its keys in the episode, waiting-feedback and capture buckets."""
        subjects = [("INGEST", f"{Subjects.INGEST_EPISODE}.{tenant}"), ("INGEST", f"{Subjects.INGEST_FEEDBACK}.{tenant}"),
                    ("INGEST", f"{Subjects.INGEST_SETTLED}.{tenant}"), ("INGEST", f"{Subjects.INGEST_COMPLETION}.{tenant}.>"),
                    ("INGEST", f"{Subjects.INGEST_CANDIDATE}.{tenant}"),
                    ("TRAJ", f"{Subjects.TRAJ_LIVE}.{tenant}.>"), ("TRAJ", f"{Subjects.TRAJ_LIVE_JUDGED}.{tenant}.>"),
                    ("TRAJ", f"{Subjects.TRAJ_LIVE_SHADOW}.{tenant}.>")]
        erased = [EpisodeRecord.FromString(e.value) for e in await live_entries(self.episodes.kv, key_prefix=f"{tenant}.")]
        messages = 0
        for stream, subject in subjects:
            info = await self.bus.js.stream_info(stream, subjects_filter=subject)
            n = sum((info.state.subjects or {}).values())
            if n:
                await self.bus.js.purge_stream(stream, subject=subject)
                messages += n
        keys = 0
        for bucket in (self.episodes, self.orphans, self.captures):
            if bucket is None:
                continue
            for entry in await live_entries(bucket.kv, values=False, key_prefix=f"{tenant}."):
                await bucket.kv.purge(entry.key)
                keys += 1
        self.open_counts[tenant] = 0
        await self._announce_erased(tenant, erased)
        ERASED.labels("tenant").inc(keys)
        log.info("tenant purged", extra={"tenant": tenant, "messages": messages, "keys": keys})
        return PurgeTenantResponse(messages_deleted=messages, keys_deleted=keys)

    async def sweep(self) -> None:
        """One pass over the records: close idle episodes, settle those past their deadline
        (publishing the `SettledEpisode`), erase expired ones, recount open episodes."""
        now = self.clock()
        counts: Counter[str] = Counter()
        for entry in await live_entries(self.episodes.kv):
            record = EpisodeRecord.FromString(entry.value)
            tenant = record.episode.tenant
            if now >= record.expires_unix_s > 0:
                await self._erase(entry.key, record)
                ERASED.labels("retention").inc()
                continue
            nxt = advance(record, now, self.cfg.settle_window_s, self.cfg.idle_close_s)
            if nxt is not None:
                await self._move(entry.key, nxt, now)
                if nxt == State.STATE_SETTLED:
                    continue
            if record.state != State.STATE_SETTLED:
                counts[tenant] += 1
        self.open_counts = counts
        for tenant in self.cfg.tenants:
            OPEN_EPISODES.labels(tenant).set(counts[tenant])

    async def _move(self, key: str, state: int, now: float) -> None:
        for _ in range(_CAS_TRIES):
            record, revision = await self.episodes.get(key)
            if not isinstance(record, EpisodeRecord) or advance(record, now, self.cfg.settle_window_s,
                                                                self.cfg.idle_close_s) != state:
                return  # changed meanwhile (a new revision, or another replica moved it)
            new = EpisodeRecord()
            new.CopyFrom(record)
            new.state = state  # type: ignore[assignment]  # protobuf enum fields take their int values
            tenant = record.episode.tenant
            captures: dict[str, CapturedCompletion] = {}
            if state == State.STATE_CLOSED:
                new.settle_deadline_unix_s = now + self.cfg.settle_window_s
            else:
                settled = SettledEpisode(episode=record.episode, feedback=record.feedback,
                                         late_feedback=record.late_feedback, erasure_epoch=record.erasure_epoch)
                ack = await self.bus.publish(f"{Subjects.INGEST_SETTLED}.{tenant}", settled,
                                             msg_id=msg_id(tenant, record.erasure_epoch,
                                                           escape_id(record.episode.episode_id), "settled"))
                new.stream_seqs.append(ack.seq)
                captures = await self._captures_of(tenant, record.episode.episode_id)
                live = to_trajectory(settled, captures)
                traj_ack = await self.bus.publish(f"{Subjects.TRAJ_LIVE}.{tenant}.{escape_id(record.episode.episode_id)}",
                                                  live.trajectory,
                                                  msg_id=live.trajectory.trajectory_id)  # names its epoch
                new.traj_seqs.append(traj_ack.seq)
                candidate = task_candidate(settled, now)
                if candidate is not None:  # its msg id is its content hash: the same failure twice is stored once
                    cand_ack = await self.bus.publish(f"{Subjects.INGEST_CANDIDATE}.{tenant}", candidate,
                                                      msg_id=msg_id("cand", record.erasure_epoch, tenant,
                                                                    candidate.candidate_id))
                    CANDIDATES.labels("duplicate" if cand_ack.duplicate else "published").inc()
                    if not cand_ack.duplicate:
                        new.stream_seqs.append(cand_ack.seq)
            try:
                await self.episodes.kv.update(key, new.SerializeToString(), last=revision)
            except KeyWrongLastSequenceError:
                continue
            if state == State.STATE_SETTLED:
                SETTLED.labels(tenant).inc()
                served = live.served_turns
                LIVE_TURNS.labels("served").inc(served)
                LIVE_TURNS.labels("retokenized").inc(live.retokenized_turns)
                LIVE_TURNS.labels("foreign").inc(len(live.trajectory.steps) - served - live.retokenized_turns)
                CAPTURES.labels("joined").inc(len(captures) - live.orphan_captures)
                CAPTURES.labels("orphan").inc(live.orphan_captures)
                await self._drop_captures(tenant, record.episode.episode_id, list(captures))
                log.info("episode settled", extra={"tenant": tenant, "episode": record.episode.episode_id,
                                                   "feedback": len(record.feedback), "served_turns": served,
                                                   "orphan_captures": live.orphan_captures})
            return

    async def run_sweeper(self) -> None:
        """Sweep every ``sweep_every_s`` seconds until cancelled (a failed sweep is retried)."""
        while True:
            try:
                await self.sweep()
            except _SWEEP_RETRIED as exc:
                log.warning("sweep failed; retrying", extra={"error": f"{type(exc).__name__}: {exc}"})
            await asyncio.sleep(self.cfg.sweep_every_s)
