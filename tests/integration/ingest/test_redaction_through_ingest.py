"""The redaction corpus (tests/data/redaction_corpus.yaml) through the real ingest HTTP API and a
real nats-server: every positive is gone from the INGEST and TRAJ streams, the KV buckets and the
log, every control keeps its exact text, and the redaction metric counts what was replaced, by
tenant and kind."""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
import yaml
from nats.js.api import ConsumerConfig as JsConsumerConfig

from rlanything.v1.events_pb2 import Trajectory
from rlanything.v1.ingest_pb2 import IngestEpisode
from services.common.bus import EventBus
from services.common.kv import live_entries
from services.common.nats_server import free_port
from services.common.streams import STREAMS, Subjects

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEY = "acme-key-0123456789"
HEADERS = {"Authorization": f"Bearer {KEY}"}
CORPUS = yaml.safe_load((Path(__file__).parents[2] / "data" / "redaction_corpus.yaml").read_text(encoding="utf-8"))
PLACEHOLDER = re.compile(r"<[A-Z_]+_[0-9]+>")
CARDS_AND_TIMESTAMPS = ("paid with 4111 1111 1111 1111 at 1748503543012, 5555 5555 5555 4444 at 1548138160707, "
                        "3782 822463 10005, 6011 1111 1111 1117 and 3530 1113 3330 0000 (batch 1748503543012)")


def stream_names() -> tuple[str, str]:
    """The streams that hold redacted conversations: INGEST and the one of the live trajectories."""
    traj = next(s.name for s in STREAMS if any(Subjects.TRAJ_LIVE.startswith(p.rstrip(">")) for p in s.subjects))
    ingest = next(s.name for s in STREAMS if any(Subjects.INGEST_EPISODE.startswith(p.rstrip(">")) for p in s.subjects))
    return ingest, traj


async def messages(bus: EventBus, stream: str) -> list[tuple[str, bytes]]:
    """(subject, payload) of every message of ``stream``."""
    info = await bus.js.stream_info(stream)
    if info.state.messages == 0:
        return []
    sub = await bus.js.pull_subscribe(">", durable=None, stream=stream, config=JsConsumerConfig(filter_subject=">"))
    got: list[tuple[str, bytes]] = []
    while len(got) < info.state.messages:
        got += [(m.subject, m.data) for m in await sub.fetch(info.state.messages - len(got), timeout=5)]
    await sub.unsubscribe()
    return got


def post(client: httpx.Client, episode_id: str, text: str, revision: int = 0, ended: bool = True,
         answer: str | None = None, extra: list[dict] | None = None) -> None:
    """One episode: ``text`` from the user, then ``answer`` (the same text when None) from the assistant."""
    body = {"episodeId": episode_id, "revision": revision, "ended": ended, "userRef": "user-1",
            "consent": {"training": True}, "taskType": "chat",
            "messages": [{"role": "user", "content": text}, {"role": "assistant", "content": answer or text},
                         *(extra or [])]}
    response = client.post("/v1/ingest/episodes", headers=HEADERS, json=body)
    assert (response.status_code, response.json()["status"]) == (202, "STATUS_ACCEPTED"), response.text


def redaction_metric(metrics_port: int) -> dict[tuple[str, str], float]:
    """``rla_ingest_redactions_total`` by (tenant, kind), scraped from the process's /metrics."""
    text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text
    out = {}
    for line in text.splitlines():
        if line.startswith("rla_ingest_redactions_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            assert set(labels) == {"tenant", "kind"}, line
            out[(labels["tenant"], labels["kind"])] = float(line.rsplit(" ", 1)[1])
    return out


async def test_the_corpus_through_ingest_leaks_nothing_and_keeps_every_control(spawn_service, bus) -> None:
    http_port, metrics_port = free_port(), free_port()
    config = {"ingest": {"http_port": http_port, "settle_window_s": 1.0, "sweep_every_s": 0.2,
                         "server": {"metrics_port": metrics_port},
                         "tenants": {"acme": {"key": KEY, "secret": "s3cret"}},
                         "redaction": {"phone_regions": ["US", "GB", "FR", "DE"]}}}
    svc = spawn_service("ingest", yaml.safe_dump(config))
    client = httpx.Client(base_url=f"http://127.0.0.1:{http_port}", timeout=10)
    deadline = time.monotonic() + 10
    while True:
        try:
            if client.get("/healthz").status_code == 200:
                break
        except httpx.TransportError:
            assert time.monotonic() < deadline, "ingest HTTP did not come up"
            time.sleep(0.05)

    positives, controls = CORPUS["positives"], CORPUS["controls"]
    expected: dict[str, str] = {}
    for i, case in enumerate(positives):
        post(client, f"pos-{i}", case["text"].replace("{}", case["value"]))
        expected[f"pos-{i}"] = case["text"].replace("{}", f"<{case['kind']}_1>")
    for i, text in enumerate(controls):
        post(client, f"ctl-{i}", text)
        expected[f"ctl-{i}"] = text
    # 5 cards among 3 Luhn-valid timestamps count 5; a later revision repeating them adds nothing.
    post(client, "cards", CARDS_AND_TIMESTAMPS, ended=False, answer="noted")
    post(client, "cards", CARDS_AND_TIMESTAMPS, revision=1, answer="noted",
         extra=[{"role": "user", "content": "thanks"}, {"role": "assistant", "content": "you are welcome"}])
    note = {"feedbackId": "fb-1", "episodeId": "ctl-0", "kind": "KIND_TEXT", "text": "write to jane.doe%40example.com"}
    assert client.post("/v1/ingest/feedback", headers=HEADERS, json=note).json()["status"] == "STATUS_APPLIED"

    ingest_stream, traj_stream = stream_names()
    n_episodes = len(expected) + 1
    deadline = time.monotonic() + 60
    while True:
        live = (await bus.js.stream_info(traj_stream, subjects_filter=f"{Subjects.TRAJ_LIVE}.>")).state.messages
        if live >= n_episodes:
            break
        assert time.monotonic() < deadline, f"{live} of {n_episodes} live trajectories after 60 s"
        time.sleep(0.2)

    ingest_msgs, traj_msgs = await messages(bus, ingest_stream), await messages(bus, traj_stream)
    # Each episode's stored text reads exactly as expected: positives replaced whole, controls unchanged.
    stored = {}
    for subject, data in ingest_msgs:
        if subject.startswith(f"{Subjects.INGEST_EPISODE}."):
            ep = IngestEpisode.FromString(data)
            stored[ep.episode_id] = ep
    responses = {}
    for subject, data in traj_msgs:
        if subject.startswith(f"{Subjects.TRAJ_LIVE}."):
            traj = Trajectory.FromString(data)
            responses[traj.trajectory_id.split("/")[2]] = traj.steps[0]  # live/<tenant>/<episode>[/e<n>]
    wrong = [(eid, stored[eid].messages[0].content, want) for eid, want in expected.items()
             if [m.content for m in stored[eid].messages] != [want, want]]
    wrong += [(eid, responses[eid].response, want) for eid, want in expected.items()
              if responses[eid].response != want or want not in responses[eid].prompt]
    assert wrong == []

    # No positive (nor any listed fragment of it) anywhere: streams, KV buckets, the service's log.
    everything = b"".join(data for _, data in ingest_msgs + traj_msgs) + svc.log_path.read_bytes()
    for bucket in ("ingest_episodes", "ingest_orphans", "ingest_captures"):
        everything += b"".join(e.value for e in await live_entries(await bus.js.key_value(bucket)))
    leaks = [(c["kind"], frag) for c in positives for frag in [c["value"], *c.get("leaks", [])]
             if frag.encode() in everything]
    leaks += [("EMAIL", "jane.doe%40example.com")] if b"jane.doe%40example.com" in everything else []
    false_placeholders = [text for i, text in enumerate(controls)
                          if PLACEHOLDER.search(stored[f"ctl-{i}"].messages[0].content)]
    assert (len(leaks), len(false_placeholders)) == (0, 0), (leaks, false_placeholders)

    # The metric: each positive twice (user and assistant turn), the 5 cards once, the feedback's e-mail.
    want = Counter()
    for case in positives:
        want[("acme", case["kind"])] += 2
    want[("acme", "CARD")] += 5
    want[("acme", "EMAIL")] += 1
    assert redaction_metric(metrics_port) == {k: float(v) for k, v in want.items()}
