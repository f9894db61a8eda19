"""Secure erasure on JetStream: overwrite stored messages instead of only marking them deleted.

A JetStream purge (of a subject, or of a KV key) marks its messages deleted; their bytes stay in
the stream's block files until the block is compacted or removed. Deleting a message by sequence
(``$JS.API.STREAM.MSG.DELETE`` without ``no_erase``) makes the server overwrite it in place with
random data (nats-server "secure erase"). `erase_subject` finds every message of a subject and
erases each one, so an erased user's text does not stay on disk (NATS docs, "JetStream wire API:
STREAM.MSG.DELETE"; nats-py `JetStreamManager.delete_msg`). KV buckets' streams deny per-message
deletes: their keys can only be purged.
"""

from __future__ import annotations

from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

__all__ = ["erase_subject"]


async def erase_subject(js: JetStreamContext, stream: str, subject: str) -> int:
    """Overwrite and delete every message of ``subject`` (wildcards allowed) in ``stream``; returns
    how many. Raises nats errors other than "no (more) message" (the caller's erasure then fails and
    can be retried: erasing is idempotent)."""
    erased, seq = 0, 1
    while True:
        try:
            msg = await js.get_msg(stream, seq=seq, subject=subject, next=True)
        except NotFoundError:
            return erased
        if msg.seq is None:
            return erased
        try:
            if await js.delete_msg(stream, msg.seq):
                erased += 1
        except NotFoundError:
            pass  # gone meanwhile (max_age, another replica's erasure)
        seq = msg.seq + 1

