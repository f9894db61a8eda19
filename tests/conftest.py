"""Shared fixtures: a real nats-server per test (temp store, free port) and a connected bus."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from services.common.bus import EventBus
from services.common.config import ConsumerConfig, NatsConfig
from services.common.nats_server import NatsServer


@pytest.fixture
def nats_server() -> Iterator[NatsServer]:
    """A `nats-server -js` on a free loopback port with a temporary JetStream store."""
    with NatsServer() as server:
        yield server


@pytest.fixture
def consumer_config() -> ConsumerConfig:
    """Fast delivery settings for tests (short ack wait and backoff)."""
    return ConsumerConfig(ack_wait_s=1.0, max_deliveries=3, backoff_s=[0.05], fetch_batch=8, fetch_timeout_s=0.3)


@pytest.fixture
async def bus(nats_server: NatsServer, consumer_config: ConsumerConfig) -> AsyncIterator[EventBus]:
    """An `EventBus` connected to ``nats_server`` with every project stream created."""
    b = await EventBus.connect(NatsConfig(url=nats_server.url), consumer_config, name="test")
    await b.ensure_streams()
    yield b
    await b.close()
