"""Hot-loading: keep a serving model on the newest announced version of its role.

Both the policy's generator and the reward model's judge follow their trainer's versions the
same way: poll the latest `ModelVersion` (`checkpoints.VersionStore`), load a newer checkpoint in
a worker thread, export the lag and the served version, log the switch. No restart.
"""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import Counter, Gauge

from services.common.bus import CONNECTION_ERRORS
from services.common.checkpoints import Reloadable, VersionStore

__all__ = ["VersionFollower", "VERSION_LAG", "SERVED_VERSION", "LOAD_FAILURES"]

VERSION_LAG = Gauge("rla_version_lag_seconds", "Seconds from a version's announcement to serving it.", ["role"])
SERVED_VERSION = Gauge("rla_served_version", "Model version this process serves.", ["role"])
LOAD_FAILURES = Counter("rla_version_load_failures_total", "Announced versions this process refused because they "
                                                          "failed to load (corrupt, mismatched, failed canary), by role.",
                        ["role"])


class VersionFollower:
    """Loads newer versions of ``role`` into ``model`` (a generator or a judge)."""

    def __init__(self, versions: VersionStore, role: str, model: Reloadable, log: logging.Logger,
                 poll_s: float = 0.5) -> None:
        self.versions = versions
        self.role = role
        self.model = model
        self.log = log
        self.poll_s = poll_s
        """Seconds between two looks at the latest version."""
        self.refused = -1
        """The newest version that failed to load (-1: none): it and older ones are not tried again."""

    async def load_latest(self) -> bool:
        """Load the latest version if it is newer than the served one (and than the last one refused);
        True when it loaded one.

        A version that fails to load (a corrupt or mismatched checkpoint, a failed sync canary:
        `services.common.models.canary`) is refused: logged with its reason, counted in
        ``rla_version_load_failures_total``, and not tried again; the version served before stays
        served, and the next newer version is tried when it is announced. Raises only what reading
        the latest version from NATS raises (`CONNECTION_ERRORS`).
        """
        latest = await self.versions.latest(self.role)
        if latest is None or latest.version <= max(self.model.model_version, self.refused):
            return False
        try:
            loaded = await self.versions.load_newer(self.role, self.model)
        except CONNECTION_ERRORS:
            raise
        except Exception as exc:  # noqa: BLE001 - any load failure: refuse this version, keep the served one
            self.refused = int(latest.version)
            LOAD_FAILURES.labels(self.role).inc()
            self.log.error("refused a version that failed to load; still serving the one before",
                           extra={"role": self.role, "version": int(latest.version), "uri": latest.uri,
                                  "serving": self.model.model_version, "error": f"{type(exc).__name__}: {exc}"[:2000]})
            return False
        if loaded is None:
            return False
        latest, lag_s = loaded
        VERSION_LAG.labels(self.role).set(lag_s)
        SERVED_VERSION.labels(self.role).set(latest.version)
        self.log.info("serving new version", extra={"role": self.role, "version": latest.version,
                                                    "uri": latest.uri, "lag_s": round(lag_s, 3)})
        return True

    async def run(self) -> None:
        """Poll forever (a background task of the service; cancelled at shutdown).

        A poll that fails because NATS is slow, hung or away (`CONNECTION_ERRORS`) is logged and
        retried at the next poll: the service's link watch, not this task, decides when the process
        gives up on NATS (``nats.reconnect_budget_s``). Any other error ends the task (and the process).
        """
        while True:
            await asyncio.sleep(self.poll_s)
            try:
                await self.load_latest()
            except CONNECTION_ERRORS as exc:
                self.log.warning("version poll failed; retrying", extra={"role": self.role,
                                                                         "error": f"{type(exc).__name__}: {exc}"})
