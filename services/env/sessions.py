"""Episode sessions of the env service: ids, step budgets, idle expiry."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from rlanything.v1.events_pb2 import TaskRef

from services.common.errors import NotFoundError
from services.common.session_ids import replica_session_id
from services.env.families.base import Episode

__all__ = ["Session", "SessionStore"]


@dataclass
class Session:
    """One open episode."""

    session_id: str
    ref: TaskRef
    episode: Episode
    max_steps: int
    plan_length: int | None
    """Oracle plan length from the current state (steps); None = no oracle."""
    last_used_s: float
    steps: int = 0
    done: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class SessionStore:
    """Open sessions; a session idle for ``idle_timeout_s`` seconds expires (and is closed)."""

    def __init__(self, idle_timeout_s: float, max_sessions: int, clock: Callable[[], float] = time.monotonic,
                 address: str = "") -> None:
        self.address = address
        """This replica's advertised ``host:port``, ending every session id (`services.common.session_ids`)."""
        self.idle_timeout_s = idle_timeout_s
        self.max_sessions = max_sessions
        self.clock = clock
        self._sessions: dict[str, Session] = {}
        self.expired_total = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def add(self, ref: TaskRef, episode: Episode, max_steps: int, plan_length: int | None) -> Session:
        """Register a new episode; the least recently used session is expired when full."""
        self.expire()
        if len(self._sessions) >= self.max_sessions:
            oldest = min(self._sessions.values(), key=lambda s: s.last_used_s)
            self.close(oldest.session_id)
            self.expired_total += 1
        session = Session(replica_session_id(uuid.uuid4().hex, self.address), ref, episode, max_steps, plan_length, self.clock())
        self._sessions[session.session_id] = session
        return session

    def get(self, session_id: str) -> Session:
        """The live session ``session_id`` (its idle clock restarts).

        Raises:
            NotFoundError: unknown, closed or expired session.
        """
        self.expire()
        session = self._sessions.get(session_id)
        if session is None:
            raise NotFoundError(f"session {session_id!r} is unknown, closed or expired "
                                f"(idle timeout {self.idle_timeout_s:g} s); call Reset")
        session.last_used_s = self.clock()
        return session

    def close(self, session_id: str) -> bool:
        """Close and forget a session; False when it did not exist."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        session.episode.close()
        return True

    def expire(self) -> list[str]:
        """Close every session idle for longer than the timeout; returns their ids."""
        now = self.clock()
        stale = [sid for sid, s in self._sessions.items() if now - s.last_used_s > self.idle_timeout_s]
        for sid in stale:
            self.close(sid)
        self.expired_total += len(stale)
        return stale

    def close_all(self) -> None:
        """Close every session (service shutdown)."""
        for sid in list(self._sessions):
            self.close(sid)
