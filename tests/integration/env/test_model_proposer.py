"""The model proposer (the paper's environment model): the env service as a real process asks an
OpenAI-compatible server for a variant of an admitted live task, refuses broken JSON, a missing
field, the parent again and an unsolvable reference, each with its reason on rla.env.pool, and
makes a valid variant a candidate that the acceptance rule admits from its own rollouts' acc. The
same path against the project's own /v1/chat/completions (the policy service's tiny model)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import pytest

from rlanything.v1 import env_pb2, env_pb2_grpc
from rlanything.v1.events_pb2 import DIRECTION_EASIER, TaskPoolEvent, TaskReport
from rlanything.v1.ingest_pb2 import LiveTaskCandidate
from services.common.nats_server import free_port
from services.common.streams import Subjects
from tests.integration.env.test_live_tasks import live_tasks
from tests.support import events

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CONFIG = """
env:
  cache_dir: {cache}
  families:
    - {{type: gym_text, knobs: {{size: 4, hole_prob: 0.2}}, train_slots: 1}}
    - {{type: live, knobs: {{hint: 0}}, train_slots: 0, proposer: model}}
  scheduler: {{enabled: false}}
  live_heldout_every: 0
  adaptation: {{model_proposer: {{base_url: "{url}", model: "{model}", timeout_s: 120}}}}
"""
PARENT = "[user]\n<<<\nWhat is 17+25?\n>>>"
SCRIPT = [
    "Sure! Here is a harder task: what is 17*25?",                                # not JSON
    json.dumps({"prompt": "What is 17*25?"}),                                     # a field missing
    json.dumps({"prompt": PARENT, "reference": "42"}),                            # the parent again
    json.dumps({"prompt": "What is 17*25+3?", "reference": "..."}),               # unsolvable: nothing matches '...'
    "```json\n" + json.dumps({"prompt": "[user]\n<<<\nWhat is 17*25+3?\n>>>", "reference": "428",
                              "hint": "17*25 is 425"}) + "\n```",                 # valid
]


class ScriptedModel(ThreadingHTTPServer):
    """/v1/chat/completions answering the next scripted text; records each request's messages."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.requests: list[dict] = []
        super().__init__(("127.0.0.1", 0), _Handler)  # port 0: the kernel picks a free one, no race


class _Handler(BaseHTTPRequestHandler):
    server: ScriptedModel

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        text = self.server.answers.pop(0)
        out = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                          "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                       "finish_reason": "stop"}],
                          "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def scripted() -> Iterator[ScriptedModel]:
    server = ScriptedModel(SCRIPT)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def report(task, acc: float, job: str, candidate: bool, bad_answers: tuple[str, ...] = ()) -> TaskReport:
    r = TaskReport(job_id=job, round=0, task=task, group_size=8, rollouts=8, wins=int(acc * 8), acc=acc,
                   is_candidate=candidate)
    if bad_answers:
        r.bad_steps.add(trajectory_id=f"{job}/0", step_indices=[0], actions=list(bad_answers))
    return r


async def admitted_live_task(bus, env: env_pb2_grpc.EnvironmentStub):
    from services.ingest.candidates import candidate_id

    c = LiveTaskCandidate(tenant="acme", candidate_id=candidate_id("acme", "math", PARENT), task_type="math",
                          prompt=PARENT, reference="42", source_trajectory_id="live/acme/e1")
    await bus.publish(f"{Subjects.INGEST_CANDIDATE}.acme", c, msg_id="c1")
    (task,) = live_tasks(env, 1)
    await bus.publish(Subjects.CRITIC_TASK, report(task.ref, 0.5, "r0/admit", True), msg_id="r0/admit")
    await events(bus, Subjects.ENV_POOL, "REPORTS", 1, TaskPoolEvent)
    (task,) = live_tasks(env, 1)
    assert task.split == "train"
    return task


async def too_easy(bus, task, times: int, bad_answer: str) -> list[TaskPoolEvent]:
    """Report ``task`` too easy (acc 1, ``bad_answer`` called bad) ``times`` times, one at a time: each
    asks the model for a harder variant (two pool events each: requested, then the verdict)."""
    for n in range(times):
        await bus.publish(Subjects.CRITIC_TASK, report(task, 1.0, f"r{n}/easy", False, (bad_answer,)), msg_id=f"r{n}/easy")
        await events(bus, Subjects.ENV_POOL, "REPORTS", 2 + 2 * n, TaskPoolEvent)
    return await events(bus, Subjects.ENV_POOL, "REPORTS", 2 * times, TaskPoolEvent)


def kinds(evs: list[TaskPoolEvent]) -> list[str]:
    return [TaskPoolEvent.Kind.Name(e.kind).removeprefix("KIND_") for e in evs]


async def test_a_model_written_variant_is_checked_then_accepted_by_its_own_rollouts(
        spawn_service, tmp_path, bus, scripted: ScriptedModel) -> None:
    url = f"http://127.0.0.1:{scripted.server_address[1]}/v1"
    svc = spawn_service("env", CONFIG.format(cache=tmp_path / "cache", url=url, model="scripted"))
    env = env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(svc.address))
    task = await admitted_live_task(bus, env)
    # too easy (acc 1) five times: each report asks the model for a harder variant
    for n in range(5):
        await bus.publish(Subjects.CRITIC_TASK, report(task.ref, 1.0, f"r{n + 1}/easy", False, ("\\boxed{41}",)),
                          msg_id=f"r{n + 1}/easy")
        await events(bus, Subjects.ENV_POOL, "REPORTS", 3 + 2 * n, TaskPoolEvent)
    evs = (await events(bus, Subjects.ENV_POOL, "REPORTS", 11, TaskPoolEvent))[1:]
    assert kinds(evs) == ["REQUESTED", "REJECTED_UNDEPLOYABLE"] * 4 + ["REQUESTED", "PROPOSED"]
    reasons = [e.reason for e in evs[1::2]]
    assert "not JSON" in reasons[0] and "has no 'reference'" in reasons[1]
    assert "its parent task again" in reasons[2] and "unsolvable" in reasons[3] and "'...'" in reasons[3]
    assert all(r.startswith("model proposer (model:scripted)") for r in reasons)
    assert "harder variant" in reasons[4] and "'428'" in reasons[4]
    # what the model was shown: the task, its reference, the acc, the answer the judge called bad
    shown = scripted.requests[0]["messages"][1]["content"]
    assert "What is 17+25?" in shown and "42" in shown and "100%" in shown and "\\boxed{41}" in shown
    assert "HARDER" in shown and scripted.requests[0]["model"] == "scripted"

    # the candidate builds and its verifier accepts the reference; its own rollouts decide
    pending = evs[-1].candidate
    reset = env.Reset(env_pb2.ResetRequest(task=pending, seed=0))
    assert "17*25+3" in reset.observation
    assert env.Step(env_pb2.StepRequest(session_id=reset.session_id, action="\\boxed{428}")).won
    await bus.publish(Subjects.CRITIC_TASK, report(pending, 0.5, "r6/cand", True), msg_id="r6/cand")
    decided = (await events(bus, Subjects.ENV_POOL, "REPORTS", 12, TaskPoolEvent))[-1]
    assert kinds([decided]) == ["ACCEPTED"] and "harder" in decided.reason
    (now,) = live_tasks(env, 1)
    assert now.ref.version == pending.version and now.metadata["written_by"] == "model:scripted"


async def test_the_projects_own_openai_endpoint_is_asked_and_its_answer_judged(
        spawn_service, tmp_path, bus) -> None:
    from services.common.config.env import FamilyConfig
    from services.common.config.policy import PolicyServiceConfig
    from services.offline.bootstrap import tiny_policy

    http = free_port()
    cfg = PolicyServiceConfig(model={"cache_dir": str(tmp_path / "models"), "tiny": {"hidden_size": 64}})
    model = tiny_policy(cfg.model, FamilyConfig(type="gym_text", knobs={"size": 4, "hole_prob": 0.2}), 0)
    spawn_service("policy", json.dumps({"policy": {"role": "rollout", "openai_port": http, "model": {"source": model},
                                                   "checkpoint_dir": str(tmp_path / "ckpt")}}))
    svc = spawn_service("env", CONFIG.format(cache=tmp_path / "cache", url=f"http://127.0.0.1:{http}/v1",
                                             model="policy"))
    env = env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(svc.address))
    task = await admitted_live_task(bus, env)
    await bus.publish(Subjects.CRITIC_TASK, report(task.ref, 0.0, "r1/hard", False), msg_id="r1/hard")
    evs = (await events(bus, Subjects.ENV_POOL, "REPORTS", 3, TaskPoolEvent, timeout_s=120))[1:]
    assert kinds(evs)[0] == "REQUESTED" and evs[0].direction == DIRECTION_EASIER
    # the untrained tiny model writes no JSON task: refused with what it said; a valid one would be pending
    assert kinds(evs)[1] in ("REJECTED_UNDEPLOYABLE", "PROPOSED"), evs[1]
    assert evs[1].reason.startswith("model proposer (model:policy)") and "failed" not in evs[1].reason
