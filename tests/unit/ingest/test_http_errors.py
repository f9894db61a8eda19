"""The ingest HTTP API answers a failure of its own with an OpenAI-style JSON body: 503 while the
event bus is away or stopping (the product retries), 500 for anything else; never text/plain."""

from __future__ import annotations

from types import SimpleNamespace

import nats.errors
import pytest
from fastapi.testclient import TestClient

from services.ingest.http_api import build_app

pytestmark = pytest.mark.unit

BODY = {"episodeId": "e1", "revision": 0, "ended": True, "userRef": "u1", "consent": {"training": True},
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}


class RaisingShell:
    """A shell (fake, for this unit test) whose every write raises ``exc``."""

    def __init__(self, exc: BaseException) -> None:
        self.cfg = SimpleNamespace(max_episode_bytes=65536)
        self.exc = exc
        self.calls = 0

    def tenant_of(self, key: str | None, named: str = "") -> str:
        return "acme"

    async def record_episode(self, tenant: str, episode: object) -> object:
        self.calls += 1
        raise self.exc


@pytest.mark.parametrize("exc", [nats.errors.ConnectionClosedError(), nats.errors.NoServersError(),
                                 TimeoutError("publish timed out")])
def test_a_lost_event_bus_is_a_503_with_an_error_body(exc: BaseException) -> None:
    shell = RaisingShell(exc)
    client = TestClient(build_app(shell), raise_server_exceptions=False)
    r = client.post("/v1/ingest/episodes", json=BODY, headers={"Authorization": "Bearer k"})
    assert shell.calls == 1
    assert r.status_code == 503, r.text
    error = r.json()["error"]
    assert error["type"] == "service_unavailable"
    assert "event bus is unavailable" in error["message"] and type(exc).__name__ in error["message"]


def test_any_other_failure_is_a_500_with_an_error_body() -> None:
    client = TestClient(build_app(RaisingShell(KeyError("revision"))), raise_server_exceptions=False)
    r = client.post("/v1/ingest/episodes", json=BODY, headers={"Authorization": "Bearer k"})
    assert r.status_code == 500
    assert r.headers["content-type"] == "application/json"
    assert r.json()["error"] == {"message": "internal error: KeyError: 'revision'", "type": "server_error",
                                 "param": None, "code": "internal_error"}
