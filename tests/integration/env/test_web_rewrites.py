"""The environment model rewriting web instructions (the paper's E for its GUI setting), through the
env service as a real process with real headless browsers: an OpenAI-compatible server (scripted)
answers; broken JSON and a rewrite that changes the button to click are refused with their reasons
on rla.env.pool; a valid rewrite, checked by the scripted expert winning the page with it, becomes
the pending candidate with more distractors, is what the agent reads after the env restarts (the
template travels in the task version's metadata), and its own rollouts admit it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from rlanything.v1 import env_pb2, env_pb2_grpc
from rlanything.v1.events_pb2 import TaskPoolEvent
from services.common.streams import Subjects
from services.env.families.web_browser import BrowserMissingError, find_browser
from services.env.families.web_page import quoted
from tests.integration.env.test_model_proposer import ScriptedModel, kinds, report, too_easy
from tests.support import events

try:
    find_browser()
    MISSING = ""
except BrowserMissingError as exc:
    MISSING = str(exc)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.skipif(bool(MISSING), reason=MISSING)]

CONFIG = """
env:
  cache_dir: {cache}
  families:
    - {{type: web, knobs: {{task: 0, distractors: 1}}, train_slots: 1, browsers: 2, proposer: model}}
  scheduler: {{enabled: false}}
  adaptation: {{model_proposer: {{base_url: "{url}", model: "{model}", timeout_s: 120}}}}
"""


@pytest.fixture
def scripted() -> Iterator[ScriptedModel]:
    server = ScriptedModel([])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def web_tasks(env: env_pb2_grpc.EnvironmentStub, timeout_s: float = 30.0) -> list[env_pb2.TaskInfo]:
    """The web family's tasks once there are any (the pool is seeded after the service reports SERVING)."""
    deadline = time.monotonic() + timeout_s
    while True:
        tasks = list(env.ListTasks(env_pb2.ListTasksRequest(family="web")).tasks)
        if tasks or time.monotonic() > deadline:
            return tasks
        time.sleep(0.1)


def instruction(reset: env_pb2.ResetResponse) -> str:
    first = reset.observation.splitlines()[0]
    assert first.startswith("Instruction: "), reset.observation
    return first.removeprefix("Instruction: ")


async def test_a_rewritten_instruction_is_accepted_only_when_it_keeps_the_target_and_the_expert_wins_with_it(
        spawn_service, tmp_path, bus, scripted: ScriptedModel) -> None:
    url = f"http://127.0.0.1:{scripted.server_address[1]}/v1"
    svc = spawn_service("env", CONFIG.format(cache=tmp_path / "cache", url=url, model="scripted"))
    try:
        env = env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(svc.address))
        (task,) = web_tasks(env)
        reset = env.Reset(env_pb2.ResetRequest(task=task.ref, seed=0))
        own = instruction(reset)
        env.Close(env_pb2.CloseRequest(session_id=reset.session_id))
        (target,) = quoted(own)
        rewrite = f'Several buttons are shown below; only one of them reads "{target}". Find it and click it.'
        scripted.answers += [
            "Sure! Make it harder: click the button.",                                        # not JSON
            json.dumps({"instruction": 'Click on the "zzz" button.'}),                       # another target
            json.dumps({"instruction": rewrite, "distractors": 4}),                          # valid, busier page
        ]
        evs = await too_easy(bus, task.ref, 3, "click 99")  # each report asks the model for a harder instruction
        assert kinds(evs) == ["REQUESTED", "REJECTED_UNDEPLOYABLE"] * 2 + ["REQUESTED", "PROPOSED"]
        reasons = [e.reason for e in evs[1::2]]
        assert "not JSON" in reasons[0]
        assert f"quoted texts ['zzz'] are not the instruction's ['{target}']" in reasons[1]
        assert "harder instruction, the expert won its pages with it" in reasons[2] and "distractors 4" in reasons[2]
        shown = scripted.requests[0]["messages"][1]["content"]
        assert own in shown and "click-button" in shown and "- click 99" in shown and "HARDER" in shown

        pending = evs[-1].candidate
        svc.stop()  # the template is in the candidate's metadata: a restarted env (empty mirror) serves it
        svc.start()
        env = env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(svc.address))
        assert sorted(t.status for t in web_tasks(env)) == ["active", "pending"]
        reset = env.Reset(env_pb2.ResetRequest(task=pending, seed=0))
        assert instruction(reset) == rewrite
        assert reset.observation.count("] button") == own_buttons(env, task) + 3  # distractors 1 -> 4
        ref = next(line.split("]")[0].strip("[") for line in reset.observation.splitlines()
                   if line.endswith(f'button "{target}"'))
        win = env.Step(env_pb2.StepRequest(session_id=reset.session_id, action=f"click {ref}"))
        assert win.won and win.reward == 1.0

        await bus.publish(Subjects.CRITIC_TASK, report(pending, 0.5, "r9/cand", True), msg_id="r9/cand")
        decided = (await events(bus, Subjects.ENV_POOL, "REPORTS", 7, TaskPoolEvent))[-1]
        assert kinds([decided]) == ["ACCEPTED"]
        (now,) = web_tasks(env)
        assert now.ref.version == pending.version and now.metadata["written_by"] == "model:scripted"
        assert now.knobs["distractors"] == 4.0 and now.knobs["instruction"] > 0
    finally:
        svc.stop()  # SIGTERM: the env quits its browsers


def own_buttons(env: env_pb2_grpc.EnvironmentStub, task: env_pb2.TaskInfo) -> int:
    reset = env.Reset(env_pb2.ResetRequest(task=task.ref, seed=0))
    env.Close(env_pb2.CloseRequest(session_id=reset.session_id))
    return reset.observation.count("] button")
