"""Errors of the sandbox."""

from __future__ import annotations

from services.common.errors import UnavailableError

__all__ = ["SandboxError", "SandboxStartError"]


class SandboxError(UnavailableError):
    """The sandbox itself failed (not the program it ran): a worker lost, a set-up fault, a closed pool.
    A test it was running has verdict INFRA: never a reward (gRPC UNAVAILABLE, the step is retried)."""


class SandboxStartError(SandboxError):
    """The configured isolation cannot be set up: the sandbox refuses to start rather than run code with less."""
