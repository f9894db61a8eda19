"""The NATS link state (`services.common.bus_link`, pure), the dead-connection bound of the config
and the credential-free URL in messages."""

from __future__ import annotations

import pytest

from services.common.bus import safe_url
from services.common.bus_link import LinkState
from services.common.config import NatsConfig


def test_a_lost_connection_is_given_up_once_its_budget_is_spent() -> None:
    link = LinkState(budget_s=60.0)
    assert link.verdict(now_s=0.0) is None
    assert link.lost(now_s=100.0) is True
    assert link.lost(now_s=101.0) is False  # nats-py may report the same loss again
    assert link.verdict(now_s=159.9) is None
    assert link.verdict(now_s=160.0) == "lost for 60.0 s without reconnecting, over nats.reconnect_budget_s=60"


def test_a_reconnect_within_the_budget_resets_it() -> None:
    link = LinkState(budget_s=10.0)
    link.lost(now_s=0.0)
    assert link.back(now_s=8.5) == 8.5
    assert link.back(now_s=9.0) is None  # already up
    assert link.verdict(now_s=100.0) is None
    link.lost(now_s=100.0)
    assert link.verdict(now_s=109.0) is None and link.verdict(now_s=110.0) is not None


def test_a_connection_closed_by_the_client_ends_the_process_at_once_unless_we_close_it() -> None:
    link = LinkState(budget_s=60.0)
    link.closed(now_s=5.0)
    assert not link.up and link.verdict(now_s=5.0) == "the client closed the connection and will not reconnect"
    ours = LinkState(budget_s=60.0)
    ours.closing = True
    ours.closed(now_s=5.0)
    assert ours.verdict(now_s=500.0) is None


def test_the_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="nats.reconnect_budget_s must be > 0 seconds, got 0"):
        LinkState(budget_s=0)


def test_the_default_config_finds_a_dead_connection_within_30_s() -> None:
    assert NatsConfig().dead_connection_bound_s == 30.0
    assert NatsConfig(ping_interval_s=1, max_outstanding_pings=2).dead_connection_bound_s == 3.0


def test_messages_name_the_server_without_its_credentials() -> None:
    assert safe_url("nats://svc:s3cret-Pa55@nats:4222") == "nats://nats:4222"
    assert safe_url("nats://127.0.0.1:4222") == "nats://127.0.0.1:4222"
    assert safe_url("tls://user@nats.example") == "tls://nats.example"
    assert safe_url("nats://u:p@[::1]:4222") == "nats://[::1]:4222"
