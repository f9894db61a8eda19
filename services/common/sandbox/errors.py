"""Errors of the sandbox."""

from __future__ import annotations

__all__ = ["SandboxError", "SandboxStartError"]


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the program it ran): a worker lost, a set-up fault, a closed pool."""


class SandboxStartError(SandboxError):
    """The configured isolation cannot be set up: the sandbox refuses to start rather than run code with less."""
