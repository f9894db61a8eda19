"""Episode session ids that name the env replica holding the session: ``<local id>@<host:port>``.

An env process keeps its episodes in memory, so with several env replicas a session's Step and
Close must reach the process whose Reset opened it. The env writes its advertised address
(``env.advertise_address``) after the last ``@`` of each session id; a rollout worker sends Step and
Close there (`replica_of`), and Reset to any replica. An id without a trailing ``@host:port`` (one
env process, a remote env server with opaque ids) goes where Reset went.
"""

from __future__ import annotations

import re

__all__ = ["replica_session_id", "replica_of"]

_ADDRESS = re.compile(r"^[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5}$")
"""``host:port``: a DNS name, an IPv4 address or a bracketed IPv6 address, then a port."""


def replica_session_id(local_id: str, address: str) -> str:
    """``local_id@address``, or ``local_id`` alone when ``address`` is empty.

    Raises:
        ValueError: ``address`` is not empty and not ``host:port``, or ``local_id`` contains ``@``.
    """
    if "@" in local_id:
        raise ValueError(f"local session id must not contain '@', got {local_id!r}")
    if not address:
        return local_id
    if not _ADDRESS.fullmatch(address):
        raise ValueError(f"advertise address must be host:port, got {address!r}")
    return f"{local_id}@{address}"


def replica_of(session_id: str) -> str | None:
    """The ``host:port`` of the env replica that opened ``session_id``; None when the id names none."""
    _, at, address = session_id.rpartition("@")
    return address if at and _ADDRESS.fullmatch(address) else None
