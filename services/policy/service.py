"""The policy service process (a thin shell over the pure modules of this package)."""

from __future__ import annotations

from services.common.runtime import Service


class PolicyService(Service):
    """Policy service: generation backends, rollout workers, the policy trainer and its checkpoints."""

    name = "policy"
