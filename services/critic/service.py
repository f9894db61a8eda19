"""The critic service process (a thin shell over the pure modules of this package)."""

from __future__ import annotations

from services.common.runtime import Service


class CriticService(Service):
    """Critic service: task groups, integrated advantages, consistency rewards, task reports, metrics."""

    name = "critic"
