"""The ingest service as a real process against a real nats-server: HTTP for products, gRPC for
services, redaction at first touch, durable and idempotent episodes, late feedback, erasure."""

from __future__ import annotations

import signal
import time

import grpc
import httpx
import pytest
from nats.js.api import ConsumerConfig as JsConsumerConfig

from rlanything.v1 import ingest_pb2, ingest_pb2_grpc
from rlanything.v1.events_pb2 import JudgedTrajectory
from services.common.bus import EventBus
from services.common.kv import live_entries
from services.common.nats_server import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEY = "acme-key-0123456789"
CANARIES = ("jane.canary@example.org", "4111 1111 1111 1111", "+1 415 555 0132")
HEADERS = {"Authorization": f"Bearer {KEY}"}


def ingest_yaml(http_port: int, **extra: object) -> str:
    settings = {"settle_window_s": 1.0, "sweep_every_s": 0.2, "orphan_feedback_wait_s": 60, **extra}
    body = ", ".join(f"{k}: {v}" for k, v in settings.items())
    return (f"ingest: {{http_port: {http_port}, {body}, "
            f"tenants: {{acme: {{key: {KEY}, secret: s3cret}}, other: {{key: other-key-0123456789}}}}}}\n")


def start(spawn_service, **extra: object) -> tuple[object, httpx.Client]:
    port = free_port()
    svc = spawn_service("ingest", ingest_yaml(port, **extra))
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
    deadline = time.monotonic() + 10
    while True:
        try:
            if client.get("/healthz").status_code == 200:
                return svc, client
        except httpx.TransportError:
            assert time.monotonic() < deadline, "ingest HTTP did not come up"
            time.sleep(0.05)


def episode(episode_id: str, revision: int = 0, text: str = "What is 17 + 25?", ended: bool = False,
            consent: bool = True, user: str = "user-1", answer: str = "\\boxed{42}") -> dict:
    return {"episodeId": episode_id, "revision": revision, "ended": ended, "userRef": user,
            "consent": {"training": consent}, "taskType": "arithmetic",
            "messages": [{"role": "user", "content": text}, {"role": "assistant", "content": answer}]}


def wait_state(client: httpx.Client, episode_id: str, state: str, timeout_s: float = 10.0,
               headers: dict[str, str] | None = None) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        body = client.get(f"/v1/ingest/episodes/{episode_id}", headers=headers or HEADERS).json()
        if body.get("state") == state or time.monotonic() > deadline:
            return body
        time.sleep(0.1)


async def stream_payloads(bus: EventBus) -> list[bytes]:
    """Every message of the INGEST stream."""
    info = await bus.js.stream_info("INGEST")
    if info.state.messages == 0:
        return []
    sub = await bus.js.pull_subscribe("rla.ingest.>", durable=None, stream="INGEST",
                                      config=JsConsumerConfig(filter_subject="rla.ingest.>"))
    msgs = await sub.fetch(info.state.messages, timeout=5)
    await sub.unsubscribe()
    return [m.data for m in msgs]


async def stored_bytes(bus: EventBus) -> bytes:
    out = b"".join(await stream_payloads(bus))
    for bucket in ("ingest_episodes", "ingest_orphans"):
        out += b"".join(e.value for e in await live_entries(await bus.js.key_value(bucket)))
    return out


async def test_a_conversation_is_redacted_stored_once_and_settles_with_its_feedback(spawn_service, bus) -> None:
    svc, client = start(spawn_service)
    pii = f"I am {CANARIES[0]}, card {CANARIES[1]}, call {CANARIES[2]}. What is 17 + 25?"
    first = client.post("/v1/ingest/episodes", headers=HEADERS, json=episode("ep-1", text=pii))
    assert (first.status_code, first.json()["status"]) == (202, "STATUS_ACCEPTED")
    again = client.post("/v1/ingest/episodes", headers=HEADERS, json=episode("ep-1", text=pii))
    assert again.json()["status"] == "STATUS_DUPLICATE"
    changed = client.post("/v1/ingest/episodes", headers=HEADERS, json=episode("ep-1", text="something else"))
    assert changed.status_code == 409 and changed.json()["error"]["param"] == "revision"
    # Feedback before its episode waits for it; feedback ids are idempotent.
    early = {"feedbackId": "fb-early", "episodeId": "ep-2", "kind": "KIND_THUMBS", "value": -1}
    assert client.post("/v1/ingest/feedback", headers=HEADERS, json=early).json()["status"] == "STATUS_BUFFERED"
    assert client.post("/v1/ingest/episodes", headers=HEADERS,
                       json=episode("ep-2", ended=True)).json()["status"] == "STATUS_ACCEPTED"
    assert client.post("/v1/ingest/feedback", headers=HEADERS, json=early).json()["status"] == "STATUS_DUPLICATE"
    # The conversation goes on (revision 1, ended) and gets feedback with PII in its text.
    final = client.post("/v1/ingest/episodes", headers=HEADERS, json=episode("ep-1", revision=1, text=pii, ended=True))
    assert final.json()["status"] == "STATUS_ACCEPTED"
    stale = client.post("/v1/ingest/episodes", headers=HEADERS, json=episode("ep-1", revision=0, text=pii))
    assert stale.json()["status"] == "STATUS_SUPERSEDED"
    note = {"feedbackId": "fb-1", "episodeId": "ep-1", "kind": "KIND_CORRECTION", "text": f"mail {CANARIES[0]}: 42"}
    assert client.post("/v1/ingest/feedback", headers=HEADERS, json=note).json()["status"] == "STATUS_APPLIED"

    settled = wait_state(client, "ep-1", "STATE_SETTLED")
    assert settled["state"] == "STATE_SETTLED" and settled["feedback"] == 1 and settled["revision"] == "1"
    assert settled["redactions"] == {"EMAIL": 1, "CARD": 1, "PHONE": 1}
    assert wait_state(client, "ep-2", "STATE_SETTLED")["feedback"] == 1
    late = {"feedbackId": "fb-late", "episodeId": "ep-1", "kind": "KIND_THUMBS", "value": 1}
    assert client.post("/v1/ingest/feedback", headers=HEADERS, json=late).json()["status"] == "STATUS_LATE"
    assert wait_state(client, "ep-1", "STATE_SETTLED")["late_feedback"] == 1

    # The hand-off: one settled message per episode, redacted, with its feedback.
    info = await bus.js.stream_info("INGEST", subjects_filter="rla.ingest.settled.>")
    assert info.state.subjects == {"rla.ingest.settled.acme": 2}
    sub = await bus.js.subscribe("rla.ingest.settled.acme", stream="INGEST", ordered_consumer=True)
    handed = [ingest_pb2.SettledEpisode.FromString((await sub.next_msg(timeout=5)).data) for _ in range(2)]
    await sub.unsubscribe()
    by_id = {h.episode.episode_id: h for h in handed}
    assert [f.feedback_id for f in by_id["ep-1"].feedback] == ["fb-1"] and by_id["ep-1"].episode.revision == 1
    assert by_id["ep-1"].feedback[0].text == "mail <EMAIL_1>: 42"
    assert by_id["ep-1"].episode.messages[0].content.startswith("I am <EMAIL_1>, card <CARD_1>, call <PHONE_1>.")
    assert [f.feedback_id for f in by_id["ep-2"].feedback] == ["fb-early"]
    # Zero canaries anywhere: stream, KV buckets, the service's log.
    everything = await stored_bytes(bus) + svc.log_path.read_bytes()
    for canary in CANARIES:
        assert canary.encode() not in everything, canary
    assert b"<EMAIL_1>" in everything and b"user-1" not in everything


async def test_every_bad_request_gets_its_status_and_names_the_field(spawn_service, bus) -> None:
    _, client = start(spawn_service, max_messages=3, max_open_episodes=2)
    post = client.post
    cases = [
        (post("/v1/ingest/episodes", json=episode("e")), 401, "authorization"),
        (post("/v1/ingest/episodes", headers={"Authorization": "Bearer nope"}, json=episode("e")), 401,
         "authorization"),
        (post("/v1/ingest/episodes", headers=HEADERS, json={**episode("e"), "tenant": "other"}), 403, "tenant"),
        (post("/v1/ingest/episodes", headers=HEADERS, json=episode("e", consent=False)), 403, "consent.training"),
        (post("/v1/ingest/episodes", headers=HEADERS,
              json={**episode("e"), "messages": [{"role": "user", "content": "x"}] * 4}), 413, "messages"),
        (post("/v1/ingest/episodes", headers=HEADERS, content=b"{not json"), 422, None),
        (post("/v1/ingest/episodes", headers=HEADERS, json={**episode("e"), "colour": "red"}), 422, None),
        (post("/v1/ingest/episodes", headers=HEADERS,
              json={**episode("e"), "messages": [{"role": "robot", "content": "x"}]}), 422, "messages[0].role"),
        (post("/v1/ingest/feedback", headers=HEADERS, json={"feedbackId": "f", "episodeId": "e"}), 422, "kind"),
        (client.get("/v1/ingest/episodes/nope", headers=HEADERS), 404, "episode_id"),
    ]
    for response, status, param in cases:
        body = response.json()
        assert response.status_code == status, body
        assert body["error"]["param"] == param and body["error"]["message"]
    assert "colour" in cases[6][0].json()["error"]["message"]
    for i in range(2):
        assert post("/v1/ingest/episodes", headers=HEADERS, json=episode(f"open-{i}")).status_code == 202
    crowded = post("/v1/ingest/episodes", headers=HEADERS, json=episode("open-2"))
    assert crowded.status_code == 429 and crowded.headers["Retry-After"] == "5"
    # Nothing refused was stored.
    assert (await bus.js.stream_info("INGEST")).state.messages == 2


async def test_erasing_a_user_deletes_records_and_stream_messages(spawn_service, bus) -> None:
    _, client = start(spawn_service)
    for i, user in enumerate(["alice", "alice", "bob"]):
        client.post("/v1/ingest/episodes", headers=HEADERS, json=episode(f"ep-{i}", user=user))
    client.post("/v1/ingest/feedback", headers=HEADERS,
                json={"feedbackId": "f0", "episodeId": "ep-0", "kind": "KIND_THUMBS", "value": 1})
    assert (await bus.js.stream_info("INGEST")).state.messages == 4
    erased = client.delete("/v1/ingest/users/alice", headers=HEADERS).json()
    assert erased == {"episodes_erased": 2, "messages_deleted": 3}
    assert client.get("/v1/ingest/episodes/ep-0", headers=HEADERS).status_code == 404
    assert client.get("/v1/ingest/episodes/ep-2", headers=HEADERS).status_code == 200
    # bob's episode, and the erasure notice (episode ids, no text) that tells the judge, the critic and
    # the trainers to forget theirs
    ingest = await bus.js.stream_info("INGEST", subjects_filter="rla.ingest.>")
    assert ingest.state.subjects == {"rla.ingest.episode.acme": 1, "rla.ingest.erased.acme": 1}
    # Another tenant's key cannot erase (or see) acme's users.
    other = {"Authorization": "Bearer other-key-0123456789"}
    assert client.delete("/v1/ingest/users/bob", headers=other).json() == {}
    assert client.get("/v1/ingest/episodes/ep-2", headers=other).status_code == 404


async def test_grpc_front_door_and_a_sigkill_loses_no_posted_episode(spawn_service, bus) -> None:
    svc, client = start(spawn_service, settle_window_s=3600)
    stub = ingest_pb2_grpc.IngestStub(grpc.insecure_channel(svc.address))
    auth = (("authorization", f"Bearer {KEY}"),)
    ep = ingest_pb2.IngestEpisode(episode_id="g-1", consent=ingest_pb2.Consent(training=True),
                                  messages=[ingest_pb2.IngestMessage(role="user", content="hi")])
    ack = stub.RecordEpisode(ingest_pb2.RecordEpisodeRequest(episode=ep), metadata=auth, timeout=10)
    assert ack.status == ingest_pb2.IngestAck.STATUS_ACCEPTED
    with pytest.raises(grpc.RpcError) as err:
        stub.RecordEpisode(ingest_pb2.RecordEpisodeRequest(episode=ep), timeout=10)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    bad = ingest_pb2.IngestEpisode(episode_id="g-2", consent=ingest_pb2.Consent(training=True),
                                   messages=[ingest_pb2.IngestMessage(role="robot", content="x")])
    with pytest.raises(grpc.RpcError) as err:
        stub.RecordEpisode(ingest_pb2.RecordEpisodeRequest(episode=bad), metadata=auth, timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "messages[0].role" in err.value.details()

    for i in range(5):
        assert client.post("/v1/ingest/episodes", headers=HEADERS, json=episode(f"k-{i}")).status_code == 202
    svc.stop(signal.SIGKILL)
    svc.start()
    _, client2 = svc, httpx.Client(base_url=str(client.base_url), timeout=10)
    deadline = time.monotonic() + 10
    while True:
        try:
            client2.get("/healthz")
            break
        except httpx.TransportError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    for i in range(5):
        assert client2.get(f"/v1/ingest/episodes/k-{i}", headers=HEADERS).json()["state"] == "STATE_OPEN"
    status = stub.GetEpisode(ingest_pb2.GetEpisodeRequest(episode_id="g-1"), metadata=auth, timeout=10)
    assert status.messages == 1
    # Every other method of the contract, over gRPC too.
    fb = ingest_pb2.Feedback(feedback_id="gf-1", episode_id="g-1", kind=ingest_pb2.Feedback.KIND_THUMBS, value=1)
    ack = stub.RecordFeedback(ingest_pb2.RecordFeedbackRequest(feedback=fb), metadata=auth, timeout=10)
    assert ack.status == ingest_pb2.IngestAck.STATUS_APPLIED
    with pytest.raises(grpc.RpcError) as err:
        stub.GetEpisode(ingest_pb2.GetEpisodeRequest(episode_id="nope"), metadata=auth, timeout=10)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    erased = stub.EraseUser(ingest_pb2.EraseUserRequest(user_ref="user-1"), metadata=auth, timeout=10)
    assert erased.episodes_erased == 5  # the k-* episodes (user-1); g-1 has no user
    purged = stub.PurgeTenant(ingest_pb2.PurgeTenantRequest(), metadata=auth, timeout=10)
    assert purged.keys_deleted == 1  # g-1's record
    with pytest.raises(grpc.RpcError) as err:
        stub.PurgeTenant(ingest_pb2.PurgeTenantRequest(tenant="other"), metadata=auth, timeout=10)
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def test_settled_episode_becomes_a_live_trajectory_with_captured_turns_joined(spawn_service, bus) -> None:
    from rlanything.v1.events_pb2 import STEP_LABEL_GOOD, Trajectory

    _, client = start(spawn_service)
    for cid, response in (("cmpl-1", "\\boxed{42}"), ("cmpl-retry", "\\boxed{41}")):  # as the policy publishes
        capture = ingest_pb2.CapturedCompletion(
            tenant="acme", episode_id="ep-9", completion_id=cid, response=response, prompt_token_ids=[5, 6],
            response_token_ids=[7, 8, 9], logprobs=[-0.1, -0.2, -0.3], model_version=3,
            consent=ingest_pb2.Consent(training=True))
        await bus.publish("rla.ingest.completion.acme.ep-9", capture, msg_id=f"acme/cmpl/{cid}")
    await bus.publish("rla.ingest.completion.nobody.ep-9", ingest_pb2.CapturedCompletion(tenant="nobody"),
                      msg_id="bad-capture")
    deadline = time.monotonic() + 10
    while len(await live_entries(await bus.js.key_value("ingest_captures"))) < 2:
        assert time.monotonic() < deadline, "captures not stored"
        time.sleep(0.05)
    body = episode("ep-9", ended=True, user="carol")
    body["messages"][1].update({"completionId": "cmpl-1", "turnId": "t1"})
    assert client.post("/v1/ingest/episodes", headers=HEADERS, json=body).json()["status"] == "STATUS_ACCEPTED"
    client.post("/v1/ingest/feedback", headers=HEADERS,
                json={"feedbackId": "f9", "episodeId": "ep-9", "turnId": "t1", "kind": "KIND_THUMBS", "value": 1})
    client.post("/v1/ingest/feedback", headers=HEADERS,
                json={"feedbackId": "o9", "episodeId": "ep-9", "kind": "KIND_OUTCOME", "value": 1})
    assert wait_state(client, "ep-9", "STATE_SETTLED")["state"] == "STATE_SETTLED"

    sub = await bus.js.subscribe("rla.traj.live.completed.acme.>", stream="TRAJ", ordered_consumer=True)
    traj = Trajectory.FromString((await sub.next_msg(timeout=5)).data)
    await sub.unsubscribe()
    (step,) = traj.steps
    assert (traj.trajectory_id, traj.source, traj.outcome, traj.outcome_source) == ("live/acme/ep-9", "ingest", 1, "user")
    assert step.served_by_policy and list(step.response_token_ids) == [7, 8, 9] and step.served_version == 3
    assert step.oracle_label == STEP_LABEL_GOOD and step.response == "\\boxed{42}"
    assert len(await live_entries(await bus.js.key_value("ingest_captures"))) == 0  # joined or orphaned, then dropped
    dead = await bus.js.stream_info("DLQ")
    assert dead.state.messages == 1  # the capture of an unknown tenant, with its reason

    # a shadow judge's votes on the episode go with it (rla.traj.live.shadow.<tenant>.<episode>.<name>)
    await bus.publish("rla.traj.live.shadow.acme.ep-9.next", JudgedTrajectory(trajectory=traj), msg_id="shadow-ep-9")
    erased = client.delete("/v1/ingest/users/carol", headers=HEADERS).json()
    assert erased["episodes_erased"] == 1
    assert not (await bus.js.stream_info("TRAJ", subjects_filter="rla.traj.live.>")).state.subjects
    assert not (await bus.js.stream_info("INGEST", subjects_filter="rla.ingest.completion.acme.>")).state.subjects
    # the dead-lettered capture of an unknown tenant, and the erasure notice (episode ids, no text)
    ingest = await bus.js.stream_info("INGEST", subjects_filter="rla.ingest.>")
    assert ingest.state.subjects == {"rla.ingest.completion.nobody.ep-9": 1, "rla.ingest.erased.acme": 1}


async def test_a_tenant_purges_everything_of_its_own_and_nothing_of_another(spawn_service, bus) -> None:
    _, client = start(spawn_service)
    other = {"Authorization": "Bearer other-key-0123456789"}
    for i in range(2):
        client.post("/v1/ingest/episodes", headers=HEADERS, json=episode(f"a-{i}", ended=True))
    client.post("/v1/ingest/episodes", headers=other, json=episode("o-0", ended=True))
    client.post("/v1/ingest/feedback", headers=HEADERS,
                json={"feedbackId": "early", "episodeId": "later", "kind": "KIND_THUMBS", "value": 1})  # waits
    await bus.publish("rla.ingest.completion.acme.a-9", ingest_pb2.CapturedCompletion(
        tenant="acme", episode_id="a-9", completion_id="c"), msg_id="acme/cmpl/c")
    assert wait_state(client, "a-1", "STATE_SETTLED")["state"] == "STATE_SETTLED"
    # the other tenant's episode settles on its own clock: the purge must find it settled, not race it
    assert wait_state(client, "o-0", "STATE_SETTLED", headers=other)["state"] == "STATE_SETTLED"
    deadline = time.monotonic() + 10
    while len(await live_entries(await bus.js.key_value("ingest_captures"))) < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)

    await bus.publish("rla.traj.live.shadow.acme.a-0.next", JudgedTrajectory(), msg_id="shadow-a-0")
    purged = client.delete("/v1/ingest/tenant", headers=HEADERS).json()
    # 2 episodes + 2 settled + 1 capture on INGEST, 2 live trajectories and 1 shadow judge's votes on
    # TRAJ; 2 records, 1 waiting feedback, 1 capture in the buckets.
    assert purged == {"messages_deleted": 8, "keys_deleted": 4}
    ingest = await bus.js.stream_info("INGEST", subjects_filter="rla.ingest.>")
    assert set(ingest.state.subjects) == {"rla.ingest.episode.other", "rla.ingest.settled.other",
                                          "rla.ingest.erased.acme"}  # the notice: episode ids, no text
    traj = await bus.js.stream_info("TRAJ", subjects_filter="rla.traj.live.>")
    assert set(traj.state.subjects) == {"rla.traj.live.completed.other.o-0"}
    assert client.get("/v1/ingest/episodes/a-0", headers=HEADERS).status_code == 404
    assert client.get("/v1/ingest/episodes/o-0", headers=other).json()["state"] == "STATE_SETTLED"


async def test_two_users_with_the_same_failure_give_one_task_candidate(spawn_service, bus) -> None:
    _, client = start(spawn_service)
    for i, user in enumerate(["u1", "u2"]):
        body = episode(f"fail-{i}", ended=True, user=user)
        body["consent"]["taskGeneration"] = True
        body["outcome"] = {"value": -1, "source": "OUTCOME_SOURCE_REFERENCE_CHECK", "reference": "42"}
        assert client.post("/v1/ingest/episodes", headers=HEADERS, json=body).status_code == 202
    no_consent = episode("fail-2", ended=True)
    no_consent["outcome"] = {"value": -1, "source": "OUTCOME_SOURCE_USER", "reference": "42"}
    client.post("/v1/ingest/episodes", headers=HEADERS, json=no_consent)
    for i in range(3):
        assert wait_state(client, f"fail-{i}", "STATE_SETTLED")["state"] == "STATE_SETTLED"
    info = await bus.js.stream_info("INGEST", subjects_filter="rla.ingest.candidate.>")
    assert info.state.subjects == {"rla.ingest.candidate.acme": 1}
    sub = await bus.js.subscribe("rla.ingest.candidate.acme", stream="INGEST", ordered_consumer=True)
    cand = ingest_pb2.LiveTaskCandidate.FromString((await sub.next_msg(timeout=5)).data)
    await sub.unsubscribe()
    assert (cand.reference, cand.task_type, cand.source_trajectory_id) == ("42", "arithmetic", "live/acme/fail-0")
    assert cand.prompt == "[user]\n<<<\nWhat is 17 + 25?\n>>>"
