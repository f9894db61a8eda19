"""Key-value helpers on JetStream buckets: protobuf values and compare-and-set updates.

State that must survive a restart (task pool, latest model versions, round progress, the
critic's open groups) lives in such buckets, never only in a process's memory.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from google.protobuf.message import Message
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import BucketNotFoundError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from services.common.errors import InvalidKeyError

__all__ = ["ProtoBucket", "open_bucket", "live_entries", "LiveEntry", "escape_id", "check_key", "MAX_KEY_CHARS"]

M = TypeVar("M", bound=Message)
KEYS_FETCH = 512
"""Entries read per fetch by `live_entries`."""


_SAFE = re.compile(r"[A-Za-z0-9_-]")
MAX_KEY_CHARS = 1024
"""Longest KV key: the key is part of a subject, and NATS closes a connection whose control line
(subject and headers sizes) passes 4096 bytes."""


_VALID_KEY = re.compile(r"^[-/_=.A-Za-z0-9]+$")
"""What NATS KV accepts as a key (and it may not start or end with '.')."""


def check_key(key: str) -> str:
    """``key`` itself, when it can be a KV key.

    Raises:
        InvalidKeyError: ``key`` is empty, longer than `MAX_KEY_CHARS`, or holds a character KV
            keys may not (outside ``[-/_=.A-Za-z0-9]``, or '.' first or last).
    """
    if not key or len(key) > MAX_KEY_CHARS:
        raise InvalidKeyError(f"KV key must be 1..{MAX_KEY_CHARS} characters, got {len(key)}"
                              + (f" (starting {key[:60]!r})" if key else ""))
    if not _VALID_KEY.match(key) or key.startswith(".") or key.endswith("."):
        raise InvalidKeyError(f"{key[:80]!r} cannot be a KV key: use only letters, digits and -/_=. "
                              "(not '.' first or last)")
    return key


def escape_id(raw: str) -> str:
    """A KV key token for an id: every character outside [A-Za-z0-9_-] written as ``=XX`` per
    UTF-8 byte (KV keys allow only ``[-/_=.A-Za-z0-9]`` and '.' separates tokens). Injective: two
    different ids never share a key, and an escaped id contains no '.' or '/'.

    Raises:
        InvalidKeyError: ``raw`` is empty, or escaped it is longer than `MAX_KEY_CHARS` (an id
            from an event or a request: its handler dead-letters it or answers INVALID_ARGUMENT).
    """
    if not raw:
        raise InvalidKeyError("cannot build a KV key from an empty id")
    if len(raw) > MAX_KEY_CHARS:
        raise InvalidKeyError(f"id of {len(raw)} characters is too long for a KV key (at most {MAX_KEY_CHARS}); "
                              f"it starts {raw[:60]!r}")
    escaped = "".join(c if _SAFE.fullmatch(c) else "".join(f"={b:02X}" for b in c.encode()) for c in raw)
    return check_key(escaped)


async def open_bucket(js: JetStreamContext, name: str, history: int = 1, ttl_s: float = 0.0,
                      replicas: int = 1) -> KeyValue:
    """Open bucket ``name``, creating it when missing (safe when several processes race); a new
    bucket's entries expire after ``ttl_s`` seconds (0 = never) and are stored on ``replicas``
    nodes of the cluster (services pass ``nats.stream_replicas``)."""
    try:
        return await js.key_value(name)
    except BucketNotFoundError:
        return await js.create_key_value(bucket=name, history=history, ttl=ttl_s or None, replicas=replicas)


class ProtoBucket:
    """A JetStream KV bucket whose values are protobuf messages of one type."""

    def __init__(self, kv: KeyValue, message_type: type[M]) -> None:
        self.kv = kv
        self.message_type = message_type

    @classmethod
    async def open(cls, js: JetStreamContext, name: str, message_type: type[M], history: int = 1,
                   replicas: int = 1) -> "ProtoBucket":
        """Open (or create, on ``replicas`` nodes) bucket ``name`` holding ``message_type`` values."""
        return cls(await open_bucket(js, name, history, replicas=replicas), message_type)

    async def get(self, key: str) -> tuple[Message | None, int]:
        """The value at ``key`` and its revision; ``(None, 0)`` when absent or deleted."""
        try:
            entry = await self.kv.get(check_key(key))
        except KeyNotFoundError:
            return None, 0
        if entry.value is None:
            return None, entry.revision or 0
        return self.message_type.FromString(entry.value), entry.revision or 0

    async def put(self, key: str, value: Message) -> int:
        """Store ``value`` at ``key`` unconditionally; returns the new revision."""
        return await self.kv.put(check_key(key), value.SerializeToString())

    async def update(self, key: str, fn: Callable[[Message | None], Message], retries: int = 10) -> Message:
        """Read-modify-write ``key`` with optimistic concurrency (compare-and-set on the revision).

        Raises:
            KeyWrongLastSequenceError: another writer won ``retries`` times in a row.
        """
        check_key(key)
        for attempt in range(retries):
            current, revision = await self.get(key)
            new = fn(current)
            try:
                if revision == 0:
                    await self.kv.create(key, new.SerializeToString())
                else:
                    await self.kv.update(key, new.SerializeToString(), last=revision)
                return new
            except KeyWrongLastSequenceError:  # create() on an existing key raises it too
                if attempt == retries - 1:
                    raise
        raise AssertionError("unreachable")

    async def keys(self) -> list[str]:
        """Every live key (empty list when the bucket has none), in stream order (`live_entries`)."""
        return [entry.key for entry in await live_entries(self.kv, values=False)]


@dataclass(frozen=True)
class LiveEntry:
    """One live key of a bucket: its value (empty when listed without values) and when it was written."""

    key: str
    value: bytes
    written_unix_s: float


async def live_entries(kv: KeyValue, values: bool = True, key_prefix: str = "") -> list[LiveEntry]:
    """Every live key of ``kv`` (latest revision), in stream order; with its value when ``values``.

    ``key_prefix`` (whole tokens ending in ``.``, e.g. ``"acme.ep-1."``) keeps only the keys under
    it, filtered by the server: the cost is that of the matching keys, not of the bucket.

    Not nats-py's ``KeyValue.keys()`` or ``watch()``: their push watcher can signal "done" from
    consumer info before the already-delivered entries reach its callback, and then returns a
    partial list (seen as a trainer that never noticed its round was complete). A pull consumer
    over the last message per key ends on each message's own ``num_pending``, which cannot race.
    """
    if key_prefix and not key_prefix.endswith("."):
        raise ValueError(f"key_prefix must end with '.', got {key_prefix!r}")
    js, stream, prefix = kv._js, kv._stream, kv._pre
    sub = await js.pull_subscribe(f"{prefix}{key_prefix}>", durable=None, stream=stream, config=ConsumerConfig(
        deliver_policy=DeliverPolicy.LAST_PER_SUBJECT, ack_policy=AckPolicy.NONE, headers_only=not values,
        inactive_threshold=60.0))
    entries: list[LiveEntry] = []
    try:
        if (await sub.consumer_info()).num_pending == 0:
            return entries
        while True:
            msgs = await sub.fetch(KEYS_FETCH, timeout=5.0)
            for m in msgs:
                headers = m.headers or {}
                if headers.get("KV-Operation") not in ("DEL", "PURGE") and "Nats-Marker-Reason" not in headers:
                    written = m.metadata.timestamp.timestamp() if m.metadata.timestamp else time.time()
                    entries.append(LiveEntry(m.subject[len(prefix):], m.data if values else b"", written))
            if msgs[-1].metadata.num_pending == 0:
                return entries
    finally:
        await sub.unsubscribe()
