"""Whether a process's NATS connection is up, and when a lost one has used up its reconnect budget (pure).

nats-py finds a dead connection itself (its PINGs: ``nats.ping_interval_s``,
``nats.max_outstanding_pings``) and then reconnects every ``nats.reconnect_time_wait_s`` seconds;
its callbacks feed `LinkState`. The budget is kept here in seconds rather than as nats-py's
``max_reconnect_attempts``, because one attempt takes ~0 s against a refused port and
``nats.connect_timeout_s`` against a hung server, so a count of attempts bounds no time.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LinkState"]


@dataclass
class LinkState:
    """The state of one NATS connection; times are monotonic seconds passed in by the caller.

    Attributes:
        budget_s: seconds a lost connection may stay lost (``nats.reconnect_budget_s``).
        up: the connection is usable.
        lost_at_s: when it was found lost (None while up).
        closed_by_client: nats-py closed it and will not reconnect (a fatal server error, e.g. an
            authorization violation) without this process asking.
        closing: this process is closing it (its own stop): nothing is wrong any more.
    """

    budget_s: float
    up: bool = True
    lost_at_s: float | None = None
    closed_by_client: bool = False
    closing: bool = False

    def __post_init__(self) -> None:
        if not self.budget_s > 0:
            raise ValueError(f"nats.reconnect_budget_s must be > 0 seconds, got {self.budget_s!r}")

    def lost(self, now_s: float) -> bool:
        """Note that the connection was found lost; True when it was up until now (a change)."""
        if not self.up:
            return False
        self.up, self.lost_at_s = False, now_s
        return True

    def back(self, now_s: float) -> float | None:
        """Note that the connection is up again; the seconds it was lost, or None when it was up."""
        if self.up:
            return None
        down_s = now_s - (self.lost_at_s if self.lost_at_s is not None else now_s)
        self.up, self.lost_at_s = True, None
        return down_s

    def closed(self, now_s: float) -> None:
        """Note that the connection was closed (by nats-py, or by this process when ``closing``)."""
        self.lost(now_s)
        if not self.closing:
            self.closed_by_client = True

    def verdict(self, now_s: float) -> str | None:
        """Why the process must end now, or None while it may go on (up, reconnecting within the
        budget, or closing on its own)."""
        if self.closing:
            return None
        if self.closed_by_client:
            return "the client closed the connection and will not reconnect"
        if self.lost_at_s is not None and now_s - self.lost_at_s >= self.budget_s:
            return (f"lost for {now_s - self.lost_at_s:.1f} s without reconnecting, "
                    f"over nats.reconnect_budget_s={self.budget_s:g}")
        return None
