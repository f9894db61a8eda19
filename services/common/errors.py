"""The one exception hierarchy of RLAnything.

Categories also inherit the matching stdlib class, so callers may catch either. Every class is
picklable (plain ``args``) so it survives multiprocessing and logging.
"""

from __future__ import annotations

__all__ = [
    "RLAnythingError",
    "ConfigError",
    "InvalidArgumentError",
    "NotFoundError",
    "InvalidEventError",
    "UnavailableError",
    "TransientError",
    "ServiceFailedError",
    "ResumeError",
    "BusLostError",
    "MessageTooLargeError",
]


class RLAnythingError(Exception):
    """Raised for any failure that RLAnything itself detects (base class)."""


class ConfigError(RLAnythingError, ValueError):
    """Raised when a run config file or a command-line override is invalid; names each field."""


class InvalidArgumentError(RLAnythingError, ValueError):
    """Raised when a request field has a bad value; mapped to gRPC INVALID_ARGUMENT."""


class ContextLengthError(InvalidArgumentError):
    """Raised when a prompt plus the tokens asked for do not fit the model's context window;
    ``param`` names the request field to change (``messages`` or ``max_tokens``)."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message, param)
        self.param = param

    def __str__(self) -> str:
        return str(self.args[0])


class NotFoundError(RLAnythingError, KeyError):
    """Raised when a referenced object (session, task, round) does not exist; gRPC NOT_FOUND."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class InvalidEventError(RLAnythingError, ValueError):
    """Raised by an event handler for a poison message: it goes to the dead-letter stream at once."""


class InvalidKeyError(InvalidEventError, InvalidArgumentError):
    """Raised when an id cannot become a KV key or subject token (empty, or too long for a NATS
    control line); a poison event (dead-lettered at once) or an INVALID_ARGUMENT request."""


class BusyError(RLAnythingError, RuntimeError):
    """Raised when a server refuses a request because too many are in progress (backpressure);
    gRPC RESOURCE_EXHAUSTED, HTTP 429. The caller should retry later."""


class UnavailableError(RLAnythingError, RuntimeError):
    """Raised by a server that could not do a request for a reason of its own, not the request's (a
    sandbox worker lost, say); gRPC UNAVAILABLE. Nothing was decided: the caller should retry."""


class TransientError(RLAnythingError, RuntimeError):
    """Raised by an event handler when a retry may succeed: the message is nak'ed with backoff."""


class ServiceFailedError(RLAnythingError, RuntimeError):
    """Raised by the launcher when a service process exits or never becomes healthy."""


class ResumeError(ServiceFailedError):
    """Raised when a restarted trainer cannot go on from the latest announced version: its saved state
    (weights, optimizer) is missing or does not fit the model, or its weights differ from the ones the
    version announced. The message names the version, the directory and what was found."""


class BusLostError(ServiceFailedError):
    """Raised when a process's NATS connection stayed lost for ``nats.reconnect_budget_s`` seconds (or
    was closed for good): the process ends with exit code 69 so that its supervisor restarts it."""


class MessageTooLargeError(RLAnythingError, ValueError):
    """Raised when a message is over ``limits.max_message_bytes`` (or a NATS server's max_payload);
    the message names the size, the limit and the setting. An event handler raising it
    dead-letters its message at once: a redelivery would build the same message again."""
