"""`free_port` hands out loopback ports that nothing else in this process or the kernel takes.

Reproduces a CI failure: the k8s local-start test picked 15 ports at fixture start, ran a
bootstrap Job for a minute, and then a pod failed to bind its port ("Failed to bind to address
127.0.0.1:34511"). The OS-picked ports came from the ephemeral range, where every outgoing
connection of that minute also takes its local port, and an OS pick may repeat a port already
handed out (its socket was closed at once).
"""

from __future__ import annotations

import socket

from services.common.nats_server import free_port


def _ephemeral_range() -> tuple[int, int]:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low, high = (int(x) for x in f.read().split())
    return low, high


def test_ports_are_outside_the_ephemeral_range() -> None:
    low, high = _ephemeral_range()
    ports = [free_port() for _ in range(50)]
    assert all(not low <= p <= high for p in ports), [p for p in ports if low <= p <= high]


def test_ports_are_never_handed_out_twice() -> None:
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)


def test_a_port_bound_by_someone_else_is_skipped() -> None:
    taken = []
    try:
        for _ in range(20):  # bind what free_port returns, then ask again: never one of these
            port = free_port()
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", port))
            s.listen()
            taken.append(s)
        bound = {s.getsockname()[1] for s in taken}
        assert all(free_port() not in bound for _ in range(100))
    finally:
        for s in taken:
            s.close()
