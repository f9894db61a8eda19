"""When to restart a process that exited (pure): the launcher's restart policy.

Kubernetes' ``restartPolicy: Always`` with its crash-loop back-off is the model: a process that
exits is started again after a delay that doubles with each restart (``backoff_s``, ``2 *
backoff_s``, … capped at ``backoff_max_s``), and a process that keeps dying uses up its budget
(``max_restarts`` within ``restart_window_s``: restarts older than the window no longer count, and
the back-off starts over), after which the run stops with the process's exit code and log.

A process that runs but answers no health check (frozen: SIGSTOPped, deadlocked) counts as dead
too, as a failing Kubernetes liveness probe does: `HealthWatch` says when, the launcher stops it
and it is restarted like one that exited.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.common.config.launcher import RestartConfig

__all__ = ["Restart", "RestartBook", "HealthWatch", "restart_delay_s"]


def restart_delay_s(restarts_before: int, backoff_s: float, backoff_max_s: float) -> float:
    """Seconds to wait before restart number ``restarts_before + 1``: ``backoff_s * 2**restarts_before``,
    at most ``backoff_max_s``."""
    return min(backoff_max_s, backoff_s * (2.0 ** restarts_before))


@dataclass(frozen=True)
class Restart:
    """One restart: which process, its exit code, when it exited and was started again (monotonic s)."""

    name: str
    exit_code: int
    exited_s: float
    restarted_s: float
    number: int
    """1 for the process's first restart (over the whole run)."""
    recent: int = 0
    """Its number within the restart window (what counts against ``max_restarts``)."""
    cause: str = ""
    """Why the launcher stopped it ('' when it exited on its own), e.g. no health answer for 30 s."""


@dataclass
class RestartBook:
    """Restarts of every supervised process: decides when an exited one starts again or stops the run."""

    policy: RestartConfig
    restarts: list[Restart] = field(default_factory=list)
    _exited: dict[str, tuple[int, float, str]] = field(default_factory=dict)

    def count(self, name: str) -> int:
        """Restarts ``name`` has used so far (over the whole run)."""
        return sum(1 for r in self.restarts if r.name == name)

    def recent(self, name: str, now_s: float) -> int:
        """Restarts of ``name`` within the last ``restart_window_s`` seconds before ``now_s`` (all of
        them when the window is 0): what counts against ``max_restarts`` and the back-off."""
        window = self.policy.restart_window_s
        return sum(1 for r in self.restarts if r.name == name and (not window or r.restarted_s > now_s - window))

    def exited(self, name: str, exit_code: int, now_s: float, cause: str = "") -> float | None:
        """Note that ``name`` exited (``cause``: why the launcher stopped it, '' when it exited on its
        own); the monotonic time at which to start it again, or None when the policy allows no
        restart (disabled, or its budget within the window is used up)."""
        _, at, _ = self._exited.get(name, (exit_code, now_s, cause))
        recent = self.recent(name, at)
        if not self.policy.enabled or recent >= self.policy.max_restarts:
            return None
        if name not in self._exited:
            self._exited[name] = (exit_code, now_s, cause)
        return at + restart_delay_s(recent, self.policy.backoff_s, self.policy.backoff_max_s)

    def restarted(self, name: str, now_s: float) -> Restart:
        """Record that ``name`` was started again (after `exited`)."""
        code, at, cause = self._exited.pop(name)
        restart = Restart(name, code, at, now_s, self.count(name) + 1, recent=self.recent(name, at) + 1, cause=cause)
        self.restarts.append(restart)
        return restart


@dataclass
class HealthWatch:
    """When a running process counts as frozen (pure; monotonic seconds passed in by the caller).

    Any answer to a health check (SERVING or NOT_SERVING: a service waiting for NATS answers) shows
    the process alive. Frozen: no answer for ``unresponsive_s`` seconds since the last one, or, before
    the first, for ``start_grace_s`` seconds since the process started (it loads models, connects).
    """

    unresponsive_s: float
    start_grace_s: float
    started_s: float
    answered_s: float | None = None

    def answered(self, now_s: float) -> None:
        """Note an answer to a health check."""
        self.answered_s = now_s

    def frozen(self, now_s: float) -> str | None:
        """Why the process counts as frozen now, or None."""
        if self.answered_s is None:
            if now_s - self.started_s > self.start_grace_s:
                return (f"no health answer {now_s - self.started_s:.1f} s after its start "
                        f"(launcher.health_timeout_s={self.start_grace_s:g})")
            return None
        if now_s - self.answered_s > self.unresponsive_s:
            return (f"no health answer for {now_s - self.answered_s:.1f} s "
                    f"(launcher.restart.unresponsive_s={self.unresponsive_s:g})")
        return None
