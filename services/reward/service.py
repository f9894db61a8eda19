"""The reward service process (a thin shell over the pure modules of this package)."""

from __future__ import annotations

from services.common.runtime import Service


class RewardService(Service):
    """Reward-model service: the generative step judge, the RM trainer and its checkpoints."""

    name = "reward"
