"""Session ids that name their env replica (`services.common.session_ids`) and the rollout worker's
client that sends a session's Step and Close to that replica (`services.policy.env_clients`)."""

from __future__ import annotations

import pytest

from services.common.session_ids import replica_of, replica_session_id
from services.env.sessions import SessionStore
from services.policy.env_clients import GrpcEnvClient


@pytest.mark.parametrize(("session_id", "replica"), [
    ("9f2c@127.0.0.1:50051", "127.0.0.1:50051"),
    ("9f2c@env-7d9f.env-pods.rlanything.svc:50051", "env-7d9f.env-pods.rlanything.svc:50051"),
    ("9f2c@[fd00::12]:50051", "[fd00::12]:50051"),
    ("9f2c", None),                      # one env process: plain ids go where Reset went
    ("user@example", None),              # a remote env's opaque id with an @ but no port
    ("9f2c@", None),
])
def test_replica_of_reads_the_address_after_the_last_at(session_id: str, replica: str | None) -> None:
    assert replica_of(session_id) == replica


def test_replica_session_id_round_trips_and_rejects_bad_input() -> None:
    assert replica_session_id("ab12", "10.1.2.3:50051") == "ab12@10.1.2.3:50051"
    assert replica_session_id("ab12", "") == "ab12"
    with pytest.raises(ValueError, match="must be host:port, got 'env'"):
        replica_session_id("ab12", "env")
    with pytest.raises(ValueError, match="must not contain '@'"):
        replica_session_id("a@b", "10.1.2.3:50051")


def test_an_env_replica_names_itself_in_every_session_id_it_opens() -> None:
    store = SessionStore(60.0, 4, address="127.0.0.1:6001")
    session = store.add(None, _NoEpisode(), 5, None)  # type: ignore[arg-type]  # ref is not read by add
    assert replica_of(session.session_id) == "127.0.0.1:6001"
    assert store.get(session.session_id) is session


class _NoEpisode:
    def close(self) -> None:
        pass


async def test_the_client_keeps_one_channel_per_replica_and_routes_by_session_id() -> None:
    client = GrpcEnvClient("ipv4:127.0.0.1:6001,127.0.0.1:6002")
    try:
        first = client.stub_for("aa@127.0.0.1:6001")
        second = client.stub_for("bb@127.0.0.1:6002")
        assert first is not second and first is not client.stub
        assert client.stub_for("cc@127.0.0.1:6001") is first  # a channel per replica, kept
        assert client.stub_for("plain-id") is client.stub     # no replica named: the Reset channel
        assert sorted(client.replicas) == ["127.0.0.1:6001", "127.0.0.1:6002"]
    finally:
        await client.aclose()
