"""End to end: a product's live traffic during `rlanything run` (every service a process, a real
NATS server, tiny models). A scripted product talks to the policy with capture headers through
the official `openai` client, posts transcripts (some twice, one without consent), outcomes,
corrections, feedback before its episode and after settling, and two identical failures; the
run must judge each consented episode once, train live samples in a later round of both models,
make the two failures one live task decided on rla.env.pool, and keep every canary out of every
stream, bucket, log and checkpoint."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import httpx
import pytest

from services.common.bus import EventBus
from services.common.config import ConsumerConfig, NatsConfig
from rlanything.v1.events_pb2 import Trajectory
from services.common.nats_server import NatsServer
from tests.launch import RLANYTHING, rounds_of, wait_for

pytestmark = [pytest.mark.system, pytest.mark.slow]

KEY = "acme-e2e-key-0123456789"
CONFIG = f"""
run_name: live-e2e
seed: 1
loop: {{rounds: 6}}
env:
  families:
    - {{type: gym_text, knobs: {{size: 4, hole_prob: 0.2}}, train_slots: 4, heldout_slots: 2, observation: window}}
    - {{type: live, knobs: {{hint: 0}}, train_slots: 0}}
  scheduler: {{tasks_per_round: 4, group_size: 4, eval_every: 1, eval_group_size: 4, max_new_tokens: 12}}
  live_heldout_every: 1            # every admitted failure is held out: policy/success_live_heldout
policy:
  model: {{threads: 1, tiny: {{hidden_size: 64}}}}
  sft: {{episodes: 60, steps: 60, eval_episodes: 4}}
  ppo: {{optimizer_steps: 2}}
  rollout: {{history_steps: 0}}
  capture: {{enabled: true}}
reward:
  model: {{threads: 1, tiny: {{hidden_size: 64}}}}
  votes: 4
  max_new_tokens: 12
  prompt_chars: 300
  field_chars: 150
  sft: {{episodes: 40, steps: 150, eval_episodes: 3}}   # long enough that it answers \\boxed{{±1}} even on chats
critic: {{group_timeout_s: 120, live: {{min_count: 0, rm_slack: 100}}}}
ingest:
  settle_window_s: 1.0
  sweep_every_s: 0.2
  tenants: {{acme: {{key: {KEY}, secret: e2e-secret}}}}
launcher: {{coldstart_dir: COLD, round_timeout_s: 600, max_invalid_answer_rate: 1.0}}
"""
CANARY_EMAIL = "zed.canary.e2e@example.org"
CANARY_CARD = "4111 1111 1111 1111"
CANARY_PHONE = "+1 415 555 0199"
CANARIES = (CANARY_EMAIL, CANARY_CARD, CANARY_PHONE)


def product(openai_url: str, ingest_url: str) -> dict[str, int]:
    """12 conversations as a product would send them; returns what it sent, by kind."""
    from openai import OpenAI

    llm = OpenAI(base_url=openai_url, api_key=KEY, max_retries=0)
    ingest = httpx.Client(base_url=ingest_url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    sent = {"episodes": 0, "duplicates": 0, "no_consent": 0, "feedback": 0, "buffered": 0}
    # Feedback that arrives before its episode.
    early = {"feedbackId": "early-0", "episodeId": "conv-0", "kind": "KIND_OUTCOME", "value": 1}
    assert ingest.post("/feedback", json=early).json()["status"] == "STATUS_BUFFERED"
    sent["buffered"] += 1
    for i in range(12):
        pii = i % 3 == 0  # a third of the users paste personal data (their turns are retokenized)
        question = "Task: reach the goal.\nWhat do you do? Answer with \\boxed{n}."
        if i in (10, 11):
            question = "Which action number is right? Answer with \\boxed{n}."  # two identical failures
        text = f"My mail is {CANARY_EMAIL}, card {CANARY_CARD}, phone {CANARY_PHONE}. {question}" if pii else question
        consent = "training,tasks" if i != 5 else ""
        reply = llm.chat.completions.with_raw_response.create(
            model="policy", messages=[{"role": "user", "content": text}], max_tokens=12, temperature=1.0,
            extra_headers={"X-RLA-Episode": f"conv-{i}", "X-RLA-Turn": "t1", "X-RLA-Consent": consent})
        answer = reply.parse()
        body = {"episodeId": f"conv-{i}", "revision": 0, "ended": True, "userRef": f"user-{i}",
                "taskType": "chat", "consent": {"training": i != 5, "taskGeneration": True},
                "messages": [{"role": "user", "content": text},
                             {"role": "assistant", "content": answer.choices[0].message.content or "",
                              "turnId": "t1", "completionId": answer.id}]}
        if i in (10, 11):
            body["outcome"] = {"value": -1, "source": "OUTCOME_SOURCE_REFERENCE_CHECK", "reference": "2"}
        r = ingest.post("/episodes", json=body)
        if i == 5:
            assert r.status_code == 403 and reply.headers["x-rla-capture"] == "rejected:no_consent"
            sent["no_consent"] += 1
            continue
        assert r.json()["status"] == "STATUS_ACCEPTED" and reply.headers["x-rla-capture"] == "queued"
        sent["episodes"] += 1
        if i % 4 == 1:  # a retry of the same post
            assert ingest.post("/episodes", json=body).json()["status"] == "STATUS_DUPLICATE"
            sent["duplicates"] += 1
        if i == 10:  # the user says what was right: an easier variant of the task can show it as a hint
            fix = {"feedbackId": "fix-10", "episodeId": "conv-10", "kind": "KIND_CORRECTION", "text": "action 2"}
            assert ingest.post("/feedback", json=fix).json()["status"] == "STATUS_APPLIED"
            sent["feedback"] += 1
        if i not in (0, 10, 11):  # outcomes from the users, won and lost in turn
            fb = {"feedbackId": f"fb-{i}", "episodeId": f"conv-{i}", "kind": "KIND_OUTCOME",
                  "value": 1 if i % 2 else -1}
            assert ingest.post("/feedback", json=fb).json()["status"] == "STATUS_APPLIED"
            sent["feedback"] += 1
    return sent


async def _live_subjects(store: Path) -> tuple[dict[str, int], list[Trajectory]]:
    """Subjects of the live trajectories in the finished run's JetStream store, and the completed ones."""
    with NatsServer(store_dir=store) as server:
        bus = await EventBus.connect(NatsConfig(url=server.url), ConsumerConfig(), name="inspect")
        info = await bus.js.stream_info("TRAJ", subjects_filter="rla.traj.live.>")
        subjects = dict(info.state.subjects or {})
        n = sum(v for k, v in subjects.items() if k.startswith("rla.traj.live.completed."))
        sub = await bus.js.subscribe("rla.traj.live.completed.>", stream="TRAJ", ordered_consumer=True)
        trajectories = [Trajectory.FromString((await sub.next_msg(timeout=10)).data) for _ in range(n)]
        await sub.unsubscribe()
        await bus.close()
    return subjects, trajectories


def _metric(text: str, name: str, **labels: str) -> float:
    """The value of one Prometheus sample, whatever the order of its labels."""
    for m in re.finditer(rf"^{name}\{{([^}}]*)\}} ([\d.e+-]+)$", text, re.M):
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(m.group(2))
    return 0.0


def test_live_traffic_during_a_run_is_judged_trained_and_turned_into_a_task(tmp_path: Path, tiny_cold: Path) -> None:
    run_dir = tmp_path / "run"
    config = tmp_path / "live.yaml"
    config.write_text(CONFIG.replace("COLD", str(tiny_cold)))  # its own key in the session cache
    run = subprocess.Popen([RLANYTHING, "run", str(config), "--run-dir", str(run_dir)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        manifest = wait_for(run_dir / "services.json", run, timeout_s=600)
        sent = product(manifest["endpoints"]["openai"], manifest["endpoints"]["ingest"])
        time.sleep(2.5)  # past the settle window: feedback now is late
        late = httpx.post(f"{manifest['endpoints']['ingest']}/feedback", headers={"Authorization": f"Bearer {KEY}"},
                          json={"feedbackId": "late-1", "episodeId": "conv-1", "kind": "KIND_THUMBS", "value": 1})
        assert late.json()["status"] == "STATUS_LATE"
        ingest_metrics = urllib.request.urlopen(
            f"http://127.0.0.1:{manifest['services']['ingest']['metrics_port']}/metrics", timeout=5).read().decode()
        stdout, stderr = run.communicate(timeout=1500)
        assert run.returncode == 0, stderr[-3000:]
    finally:
        if run.poll() is None:
            run.kill()
    rounds = rounds_of(run_dir)
    assert len(rounds) == 6
    # Live samples were trained in some round by both models.
    assert sum(r.get("policy/live_samples", 0) for r in rounds) > 0
    assert sum(r.get("reward/live_samples", 0) for r in rounds) > 0
    # The two identical failures are one live task, rolled out and decided with a reason.
    pool = [json.loads(line) for line in (run_dir / "logs" / "env.log").read_text().splitlines()
            if line.startswith("{") and json.loads(line).get("msg") == "pool decision"]
    live_decisions = [p for p in pool if p["slot"].startswith("live/")]
    assert live_decisions and {p["slot"] for p in live_decisions} == {live_decisions[0]["slot"]}
    assert all(p["reason"].startswith("live: ") for p in live_decisions)
    # Admission depends on the tiny policy's sampled answers (about 9 in 10 runs admit it): when
    # admitted, every later evaluation round reports how many held-out real failures it solves.
    if any(p["kind"] == "accepted" for p in live_decisions):
        assert any("policy/success_live_heldout" in r for r in rounds)
    else:
        assert any(p["kind"] == "rejected" for p in live_decisions)
    # Exactly one judged live trajectory per consented episode; counters equal what was sent.
    traj, trajectories = asyncio.run(_live_subjects(run_dir / "nats"))
    judged = sorted(s.rsplit(".", 1)[1] for s in traj if s.startswith("rla.traj.live.judged.acme."))
    completed = sorted(s.rsplit(".", 1)[1] for s in traj if s.startswith("rla.traj.live.completed.acme."))
    assert judged == completed == sorted(f"conv-{i}" for i in range(12) if i != 5)  # one subject per episode
    assert all(traj[s] == 1 for s in traj)  # ... with one message each
    requests = lambda status: _metric(ingest_metrics, "rla_ingest_requests_total", tenant="acme",  # noqa: E731
                                      kind="episode", status=status)
    assert requests("accepted") == sent["episodes"] and requests("duplicate") == sent["duplicates"]
    assert _metric(ingest_metrics, "rla_ingest_refused_total", reason="no_consent") == sent["no_consent"]
    assert _metric(ingest_metrics, "rla_ingest_requests_total", tenant="acme", kind="feedback",
                   status="applied") == sent["feedback"] + sent["buffered"]
    # Decoded samples: the token ids of every served turn decode to text without a canary.
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(run_dir / "checkpoints" / "policy" / "v1"))
    served = [s for t in trajectories for s in t.steps if s.served_by_policy]
    # 7 consented turns carry no personal data, so their ids were kept; a capture that reached the
    # ingest service after its episode settled (1 s here) is an orphan, so allow a few.
    assert len(served) >= 5
    decoded = "".join(tok.decode(list(s.prompt_token_ids) + list(s.response_token_ids)) for s in served)
    assert "Task: reach the goal." in decoded or "Which action" in decoded
    for canary in CANARIES:
        assert canary not in decoded, canary
    # No canary anywhere: the JetStream store (every stream and bucket), logs, checkpoints, metrics.
    files = b"".join(p.read_bytes() for p in run_dir.rglob("*") if p.is_file())
    for canary in CANARIES:
        assert canary.encode() not in files, canary
    assert b"<EMAIL_1>" in files  # the redacted form is there
