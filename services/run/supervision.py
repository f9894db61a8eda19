"""When to restart a process that exited (pure): the launcher's restart policy.

Kubernetes' ``restartPolicy: Always`` with its crash-loop back-off is the model: a process that
exits is started again after a delay that doubles with each restart (``backoff_s``, ``2 *
backoff_s``, … capped at ``backoff_max_s``), and a process that keeps dying uses up its budget
(``max_restarts``), after which the run stops with the process's exit code and log.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.common.config.launcher import RestartConfig

__all__ = ["Restart", "RestartBook", "restart_delay_s"]


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
    """1 for the process's first restart."""


@dataclass
class RestartBook:
    """Restarts of every supervised process: decides when an exited one starts again or stops the run."""

    policy: RestartConfig
    restarts: list[Restart] = field(default_factory=list)
    _exited: dict[str, tuple[int, float]] = field(default_factory=dict)

    def count(self, name: str) -> int:
        """Restarts ``name`` has used so far."""
        return sum(1 for r in self.restarts if r.name == name)

    def exited(self, name: str, exit_code: int, now_s: float) -> float | None:
        """Note that ``name`` exited; the monotonic time at which to start it again, or None when
        the policy allows no restart (disabled, or its budget is used up)."""
        if not self.policy.enabled or self.count(name) >= self.policy.max_restarts:
            return None
        if name not in self._exited:
            self._exited[name] = (exit_code, now_s)
        _, at = self._exited[name]
        return at + restart_delay_s(self.count(name), self.policy.backoff_s, self.policy.backoff_max_s)

    def restarted(self, name: str, now_s: float) -> Restart:
        """Record that ``name`` was started again (after `exited`)."""
        code, at = self._exited.pop(name)
        restart = Restart(name, code, at, now_s, self.count(name) + 1)
        self.restarts.append(restart)
        return restart
