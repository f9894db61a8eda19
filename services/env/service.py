"""The env service process (a thin shell over the pure modules of this package)."""

from __future__ import annotations

from services.common.runtime import Service


class EnvService(Service):
    """Environment service: task families, episode sessions, the task pool and the round scheduler."""

    name = "env"
