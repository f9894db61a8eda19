"""The critic's live shell: judged live trajectories (``rla.traj.live.judged.<tenant>``, durable
``critic-live``) → `live_eval.evaluate_live` with the (tenant, task type) baseline from KV →
metrics. The baseline record also keeps the ids it has counted, changed by compare-and-set, so a
redelivered trajectory never moves a baseline twice.

Its samples go to the trainers as *live* batches (``PolicySampleBatch.live``/
``RewardSampleBatch.live``, batch ids ``<trajectory_id>/policy`` and ``/reward``), published before
the baseline record is updated: a crash in between re-publishes the same ids (stored once) and
then counts the trajectory. A live batch is outside every round's ``jobs_in_round``; a
synchronous trainer trains it with the next round it trains, so round counts stay exact.
"""

from __future__ import annotations

import json
import logging

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NoKeysError
from nats.js.kv import KeyValue
from prometheus_client import Counter
from rlanything.v1.events_pb2 import JudgedTrajectory, PolicySampleBatch, RewardSampleBatch, TaskRef

from services.common.bus import Delivery, EventBus
from services.common.config import CriticServiceConfig
from services.common.errors import InvalidEventError
from services.common.kv import escape_id
from services.common.rounds import batch_id
from services.common.streams import Subjects
from services.critic.live_eval import Baseline, LiveOutcome, LiveSettings, evaluate_live

__all__ = ["LiveCritic", "LIVE_SEEN_KEPT"]

log = logging.getLogger("rlanything.critic.live")
LIVE_SEEN_KEPT = 1000
"""Trajectory ids a baseline record remembers (redeliveries come within seconds, not thousands)."""
LIVE_TRAJECTORIES = Counter("rla_critic_live_trajectories_total", "Judged live trajectories, by outcome "
                            "(evaluated, repeated: counted before).", ["outcome"])
LIVE_SKIPPED = Counter("rla_critic_live_skipped_total", "Live turns (or episodes, for rm_no_outcome) that train "
                       "nothing, by reason (not_served, stale, no_outcome, warmup, zero_advantage, rm_no_outcome, "
                       "rm_unbalanced).",
                       ["reason"])
LIVE_SAMPLES = Counter("rla_critic_live_samples_total", "Training samples built from live traffic and published "
                       "as live batches, by model (policy, reward).", ["model"])
LIVE_AGREEMENT = Counter("rla_critic_live_agreement_total", "The judge against the product's users, by signal "
                         "(outcome: the sign of its mean vote vs an external outcome; thumbs: per turn) and agree.",
                         ["signal", "agree"])


async def _keys(kv) -> list[str]:
    """The bucket's keys ([] when it holds none: nats-py raises NoKeysError then)."""
    try:
        return await kv.keys()
    except NoKeysError:
        return []


class LiveCritic:
    """Handler of judged live trajectories (see the module docstring)."""

    def __init__(self, kv: KeyValue, cfg: CriticServiceConfig, bus: EventBus | None = None) -> None:
        self.kv = kv
        self.bus = bus
        self.cfg = cfg
        live = cfg.live
        self.settings = LiveSettings(live.max_staleness, live.min_count, live.alpha, live.sigma_min, live.adv_max,
                                     live.requires_outcome, live.rm_slack)
        self.latest_policy_version = 0

    async def forget(self, tenant: str, trajectory_ids: list[str]) -> int:
        """Drop ``trajectory_ids`` from the seen-lists of ``tenant``'s task types (erased episodes; the
        baselines keep only counts and moments). Returns how many entries were dropped."""
        gone, drop = 0, set(trajectory_ids)
        for key in [k for k in await _keys(self.kv) if k.startswith(f"{tenant}.")]:
            for _ in range(10):
                entry = await self.kv.get(key)
                record = json.loads(entry.value or b"{}")
                seen = record.get("seen", [])
                kept = [t for t in seen if t not in drop]
                if len(kept) == len(seen):
                    break
                try:
                    await self.kv.update(key, json.dumps({**record, "seen": kept}).encode(), last=entry.revision)
                except KeyWrongLastSequenceError:
                    continue
                gone += len(seen) - len(kept)
                break
        return gone

    async def on_judged(self, judged: JudgedTrajectory, delivery: Delivery) -> LiveOutcome | None:
        """Evaluate one judged live trajectory; None when it was counted before.

        Raises:
            InvalidEventError: not a live trajectory (no tenant or id), or votes that do not match its steps.
        """
        t = judged.trajectory
        if t.source != "ingest" or not t.tenant or not t.trajectory_id:
            raise InvalidEventError(f"live judged trajectory {t.trajectory_id!r}: needs source 'ingest', a tenant "
                                    f"and an id (got source {t.source!r}, tenant {t.tenant!r})")
        if len(judged.judgements) != len(t.steps):
            raise InvalidEventError(f"{t.trajectory_id}: {len(judged.judgements)} judgements for {len(t.steps)} steps")
        key = f"{t.tenant}.{escape_id(t.task_type or 'chat')}"
        for _ in range(10):
            try:
                entry = await self.kv.get(key)
                record, revision = json.loads(entry.value or b"{}"), entry.revision or 0
            except KeyNotFoundError:  # also a deleted key
                record, revision = {}, 0
            if t.trajectory_id in record.get("seen", []):
                LIVE_TRAJECTORIES.labels("repeated").inc()
                return None
            base = Baseline(record.get("n", 0), record.get("mean", 0.0), record.get("var", 0.0))
            out = evaluate_live(judged, base, self.latest_policy_version, self.cfg.lam, self.cfg.invalid_vote_penalty,
                                self.settings, record.get("rm_wins", 0), record.get("rm_losses", 0))
            await self._publish(t.trajectory_id, t.task, out)
            b = out.baseline
            new = {"n": b.n, "mean": b.mean, "var": b.var, "rm_wins": out.rm_wins, "rm_losses": out.rm_losses,
                   "seen": (record.get("seen", []) + [t.trajectory_id])[-LIVE_SEEN_KEPT:]}
            try:
                if revision:
                    await self.kv.update(key, json.dumps(new).encode(), last=revision)
                else:
                    await self.kv.create(key, json.dumps(new).encode())
            except KeyWrongLastSequenceError:
                continue
            self._count(out)
            log.info("live trajectory evaluated", extra={
                "trajectory_id": t.trajectory_id, "policy_samples": len(out.policy), "reward_samples": len(out.reward),
                "skipped": dict(out.skipped), "outcome_agrees": out.outcome_agrees})
            return out
        raise KeyWrongLastSequenceError()

    async def _publish(self, trajectory_id: str, task: TaskRef, out: LiveOutcome) -> None:
        if self.bus is None:
            return
        if out.policy:
            policy = PolicySampleBatch(batch_id=batch_id(trajectory_id, "policy"), task=task, samples=out.policy, live=True)
            await self.bus.publish(Subjects.SAMPLES_POLICY, policy, msg_id=policy.batch_id)
        if out.reward:
            reward = RewardSampleBatch(batch_id=batch_id(trajectory_id, "reward"), task=task, samples=out.reward, live=True)
            await self.bus.publish(Subjects.SAMPLES_REWARD, reward, msg_id=reward.batch_id)

    @staticmethod
    def _count(out: LiveOutcome) -> None:
        LIVE_TRAJECTORIES.labels("evaluated").inc()
        for reason, n in out.skipped.items():
            LIVE_SKIPPED.labels(reason).inc(n)
        LIVE_SAMPLES.labels("policy").inc(len(out.policy))
        LIVE_SAMPLES.labels("reward").inc(len(out.reward))
        if out.outcome_agrees is not None:
            LIVE_AGREEMENT.labels("outcome", "yes" if out.outcome_agrees else "no").inc()
        LIVE_AGREEMENT.labels("thumbs", "yes").inc(out.thumbs_agree)
        LIVE_AGREEMENT.labels("thumbs", "no").inc(out.thumbs_disagree)
