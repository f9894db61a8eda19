"""The version of the contracts in proto/ that this code speaks, and the check of a peer's.

Every event is published with the header ``Rla-Contract: <version>`` and every gRPC call made
through `services.common.grpc_runtime` carries the metadata ``rla-contract: <version>``. A
consumer dead-letters an event of another version, a server answers a call of another version
with FAILED_PRECONDITION; a peer that says nothing (a tool, an older client) is accepted. Raise
the version only for a change that an older peer would misread (a field's meaning changed, a
required field added); adding an optional field does not need it (protobuf ignores unknown
fields).
"""

from __future__ import annotations

__all__ = ["CONTRACT_VERSION", "HEADER", "GRPC_METADATA_KEY", "peer_version_problem"]

CONTRACT_VERSION = 1
HEADER = "Rla-Contract"
"""NATS header of every published event."""
GRPC_METADATA_KEY = "rla-contract"
"""gRPC metadata key of every call (lower case, as gRPC requires)."""


def peer_version_problem(announced: str | None, who: str) -> str | None:
    """Why a peer that announced ``announced`` cannot be served (None: it can, or said nothing).

    ``who`` names the peer in the message, e.g. "published under" or "the caller speaks".
    """
    if announced is None or announced == "":
        return None
    try:
        version = int(announced)
    except ValueError:
        return f"{who} contract version {announced!r} is not a number; this service speaks version {CONTRACT_VERSION}"
    if version == CONTRACT_VERSION:
        return None
    return f"{who} contract version {version}; this service speaks version {CONTRACT_VERSION} (upgrade the older side)"
