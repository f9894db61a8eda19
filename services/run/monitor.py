"""Feed `RunProgress` from the event streams, without taking anything from the services.

What a round's line in metrics.jsonl counts must not depend on whether a process restarted
during the round, so everything counted comes from the limits-retention streams, read from their
first message: trajectories and judgements (TRAJ, by message id, headers only), model versions
(MODELS: what each trainer trained on, with its batch count), round metrics (METRICS) and the
task pool's decisions (REPORTS). Each is read by a `StreamFollower`, a pull consumer without
acks that, after any error (a NATS restart, a lost consumer), starts again after the last
stream sequence it saw. Ids are de-duplicated by `RunProgress`, so a replay or a redelivery
counts once. Only what the work-queue streams carry (rollout jobs and sample batches, deleted
once consumed) is seen live, on core subscriptions: the display's "in flight" figures.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from rlanything.v1.events_pb2 import ModelVersion, RolloutJob, RoundMetrics, TaskPoolEvent

from services.common.streams import Subjects
from services.common.topology import Consumers
from services.run.progress import RunProgress

__all__ = ["subscribe_progress", "ProgressFeed", "StreamFollower", "wait_caught_up", "consumer_idle"]

ENV_REPORTS_DURABLE = Consumers.ENV_TASK_REPORTS.durable
"""The env service's consumer of task reports (its curriculum decisions are made there)."""

log = logging.getLogger("rlanything.run")


class StreamFollower:
    """Every message of ``subject`` in ``stream`` from the first on, to ``sink``, in order, once.

    A pull consumer with ``AckPolicy.NONE`` (nothing acknowledged, nothing removed); when a fetch
    fails for any reason but a timeout (NATS restarted, the consumer vanished, the stream is not
    created yet) the follower waits ``retry_s`` seconds and creates a new consumer that starts
    after the last stream sequence delivered. Messages at or below that sequence are skipped, so
    a consumer whose state the broker lost in a crash (it then sends from an older sequence)
    delivers nothing twice.
    """

    def __init__(self, nc: NATS, stream: str, subject: str, sink: Callable[[Msg], None],
                 headers_only: bool = False, retry_s: float = 0.5) -> None:
        self.nc = nc
        self.stream = stream
        self.subject = subject
        self.sink = sink
        self.headers_only = headers_only
        self.retry_s = retry_s
        self.last_sequence = 0
        """Stream sequence of the last message handed to ``sink`` (0: none yet)."""
        self._sub: Any = None
        self.stopped = False
        """Set by `stop`: the loop ends at its next fetch (at most ~1 s), even if a cancellation was
        lost inside the client's fetch (Python 3.11's ``asyncio.wait_for`` can swallow one)."""

    def stop(self) -> None:
        """Ask `run` to return at its next fetch."""
        self.stopped = True

    async def run(self) -> None:
        """Follow until cancelled or stopped (`stop`)."""
        js = self.nc.jetstream()
        while not self.stopped:
            try:
                sub = await js.pull_subscribe(self.subject, stream=self.stream, config=ConsumerConfig(
                    filter_subject=self.subject, deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                    opt_start_seq=self.last_sequence + 1, ack_policy=AckPolicy.NONE,
                    headers_only=self.headers_only or None, inactive_threshold=30.0))
                self._sub = sub
                while not self.stopped:
                    try:
                        msgs = await sub.fetch(256, timeout=1.0)
                    except (nats.errors.TimeoutError, asyncio.TimeoutError):
                        continue
                    for m in msgs:
                        sequence = m.metadata.sequence.stream
                        if sequence <= self.last_sequence:
                            continue  # a consumer that outlived a broker crash with older state re-sends
                        self.sink(m)
                        self.last_sequence = sequence
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure: start a new consumer after the last sequence
                log.debug("stream follower restarts", extra={"stream": self.stream, "error": repr(exc)})
                self._sub = None
                await asyncio.sleep(self.retry_s)

    async def caught_up(self) -> bool:
        """Whether every message of the subject stored so far has reached ``sink``: the consumer
        has nothing pending and the last message it delivered was handed on. False while no
        consumer exists (the stream is missing, NATS is down) or its state cannot be read."""
        sub = self._sub
        if sub is None:
            return False
        try:
            info = await sub.consumer_info()
        except Exception:  # noqa: BLE001 - unknown means not caught up
            return False
        return info.num_pending == 0 and self.last_sequence >= (info.delivered.stream_seq or 0)


async def wait_caught_up(followers: list[StreamFollower], timeout_s: float,
                         poll_s: float = 0.1) -> list[StreamFollower]:
    """Wait until every follower has `StreamFollower.caught_up`, at most ``timeout_s`` seconds;
    returns those that had not (empty: all of them did)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    lagging = list(followers)
    while lagging:
        lagging = [f for f in lagging if not await f.caught_up()]
        if not lagging or asyncio.get_running_loop().time() >= deadline:
            break
        await asyncio.sleep(poll_s)
    return lagging


async def consumer_idle(js: Any, stream: str, durable: str) -> bool:
    """Whether the durable consumer ``durable`` of ``stream`` has handled every message it was
    given: none pending delivery, none delivered and not yet acked. False when the consumer does
    not exist (yet) or its state cannot be read."""
    try:
        info = await js.consumer_info(stream, durable)
    except Exception:  # noqa: BLE001 - unknown means not idle
        return False
    return info.num_pending == 0 and info.num_ack_pending == 0


@dataclass
class ProgressFeed:
    """What `subscribe_progress` started: core subscriptions, follower tasks, and the follower of
    the task pool's decisions (to ask whether a round's decisions have all been counted)."""

    watchers: list[Any]
    """Subscriptions and follower tasks (cancel the tasks to stop)."""
    pool: StreamFollower

    async def pool_settled(self) -> bool:
        """Whether the env has handled every task report stored so far (its consumer has none
        pending or unacknowledged: a report is acked after its pool decisions are published; no
        such consumer counts as settled) and
        every pool decision stored so far has reached `RunProgress`. A round whose groups closed
        is recorded only once this holds (or after a bound), else its ``env/requested_*`` counts
        miss the decisions the env was still making about its last reports."""
        js = self.pool.nc.jetstream()
        try:
            info = await js.consumer_info(Consumers.ENV_TASK_REPORTS.stream, ENV_REPORTS_DURABLE)
        except nats.js.errors.NotFoundError:
            info = None  # an env implementation that makes no curriculum decisions: nothing to wait for
        except Exception:  # noqa: BLE001 - unknown means not settled
            return False
        idle = info is None or (info.num_pending == 0 and info.num_ack_pending == 0)
        return idle and await self.pool.caught_up()

    def cancel(self) -> None:
        """Stop the follower tasks."""
        for w in self.watchers:
            if isinstance(w, asyncio.Task):
                w.cancel()


async def subscribe_progress(nc: NATS, progress: RunProgress) -> ProgressFeed:
    """Feed ``progress`` with every event of the loop; returns what was started."""

    def by_id(kind: str) -> Callable[[Msg], None]:
        def handler(msg: Msg) -> None:
            msg_id = (msg.headers or {}).get("Nats-Msg-Id")
            if msg_id:
                progress.on_id(kind, msg_id)
        return handler

    def decoded(message_type: Any, sink: Callable[[Any], None]) -> Callable[[Msg], None]:
        def handler(msg: Msg) -> None:
            sink(message_type.FromString(msg.data))
        return handler

    def live(handler: Callable[[Msg], None]) -> Callable[[Msg], Any]:
        async def cb(msg: Msg) -> None:
            handler(msg)
        return cb

    followers = [
        StreamFollower(nc, "TRAJ", Subjects.TRAJ_COMPLETED, by_id("trajectories"), headers_only=True),
        StreamFollower(nc, "TRAJ", Subjects.TRAJ_JUDGED, by_id("judged"), headers_only=True),
        StreamFollower(nc, "MODELS", "rla.models.>", decoded(ModelVersion, progress.on_version)),
        StreamFollower(nc, "METRICS", Subjects.METRICS_ROUND, decoded(RoundMetrics, progress.on_metrics)),
        StreamFollower(nc, "METRICS", Subjects.METRICS_ENV, decoded(RoundMetrics, progress.on_env_metrics)),
    ]
    pool = StreamFollower(nc, "REPORTS", Subjects.ENV_POOL, decoded(TaskPoolEvent, progress.on_pool))
    followers.append(pool)
    return ProgressFeed([
        await nc.subscribe(Subjects.ROLLOUT_JOBS, cb=live(decoded(RolloutJob, progress.on_job))),
        await nc.subscribe(Subjects.SAMPLES_POLICY, cb=live(by_id("policy_batches"))),
        await nc.subscribe(Subjects.SAMPLES_REWARD, cb=live(by_id("reward_batches"))),
        *[asyncio.create_task(f.run(), name=f"follow {f.stream} {f.subject}") for f in followers],
    ], pool)
