"""The policy's request limit (admission control): a bound on requests in progress, so a flood is
refused at once (HTTP 429, gRPC RESOURCE_EXHAUSTED) instead of queueing without end in memory."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from services.common.errors import BusyError

__all__ = ["RequestLimit"]


class RequestLimit:
    """At most ``limit`` requests in progress at once (one event loop: no lock needed)."""

    def __init__(self, limit: int, setting: str) -> None:
        self.limit = limit
        self.setting = setting
        """The config key of ``limit``, named in the refusal."""
        self.active = 0
        self.refused_total = 0

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one of the ``limit`` slots for the body of the ``with``.

        Raises:
            BusyError: all slots are taken.
        """
        if self.active >= self.limit:
            self.refused_total += 1
            raise BusyError(f"server busy: {self.active} requests in progress ({self.setting}={self.limit}); "
                            "retry shortly")
        self.active += 1
        try:
            yield
        finally:
            self.active -= 1
