"""The RewardModel contract, checked against the ADDRESS of any implementation.

Every implementation must: return one judgement per step, in request order, each with exactly m
votes (the request's, or its default when 0); vote values in {+1, −1, 0} that agree with the
vote's text (strict last-``\\boxed{}`` parsing); mean_vote = the mean of the values; token ids and
behaviour log-probs of equal length when present; a model version; INVALID_ARGUMENT with a
message naming the field for malformed requests. Only the oracle is deterministic: its votes are
the steps' oracle labels. Parametrized over three real servers (see conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from rlanything.v1 import reward_pb2, reward_pb2_grpc
from rlanything.v1.events_pb2 import STEP_LABEL_BAD, STEP_LABEL_GOOD, STEP_LABEL_UNSPECIFIED
from rlanything.v1.reward_pb2 import JudgeStepsRequest, StepToJudge
from services.reward.votes import parse_vote
from tests.contract.conftest import RewardModelUnderTest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OBS = "S F F\nA H F\nF F G\nYou are at row 2, column 1."


def steps() -> list[StepToJudge]:
    """Three steps of a FrozenLake episode: a good one, a bad one, an unlabelled (invalid) one."""
    prompt = f"Task: reach G.\nNow: {OBS}\nActions:\n1. left\n2. down\n3. right\n4. up\nAnswer as \\boxed{{i}}."
    return [
        StepToJudge(step_id="e/0", task_text="Reach G.", prompt=prompt, response="\\boxed{2}",
                    next_observation="You moved down.\nS F F\nF H F\nA F G", oracle_label=STEP_LABEL_GOOD),
        StepToJudge(step_id="e/1", task_text="Reach G.", prompt=prompt, response="\\boxed{3}",
                    next_observation="You fell into a hole.", oracle_label=STEP_LABEL_BAD),
        StepToJudge(step_id="e/2", task_text="Reach G.", prompt=prompt, response="no idea",
                    next_observation="Your answer was not a valid \\boxed{i}.", oracle_label=STEP_LABEL_UNSPECIFIED),
    ]


def judge(rm: RewardModelUnderTest, request: JudgeStepsRequest) -> reward_pb2.JudgeStepsResponse:
    return reward_pb2_grpc.RewardModelStub(grpc.insecure_channel(rm.address)).JudgeSteps(request, timeout=120)


def check_judgements(response: reward_pb2.JudgeStepsResponse, n_steps: int, m: int) -> None:
    assert len(response.judgements) == n_steps, "one judgement per step"
    assert [j.step_index for j in response.judgements] == list(range(n_steps)), "in request order"
    assert response.model_version == 0, "no RM version was announced: the judge votes with version 0"
    for j in response.judgements:
        assert len(j.votes) == m, f"exactly m={m} votes per step"
        values = [v.value for v in j.votes]
        assert set(values) <= {-1, 0, 1}
        assert j.mean_vote == pytest.approx(sum(values) / m), "mean_vote is S̄ with invalid votes as 0"
        for v in j.votes:
            assert parse_vote(v.response) == v.value, f"value {v.value} disagrees with its text {v.response!r}"
            assert not v.behaviour_logprobs or len(v.behaviour_logprobs) == len(v.response_token_ids)


def test_default_votes_one_judgement_per_step_in_order(reward_model: RewardModelUnderTest) -> None:
    response = judge(reward_model, JudgeStepsRequest(steps=steps()))
    check_judgements(response, 3, reward_model.default_votes)


def test_requested_votes_and_temperature(reward_model: RewardModelUnderTest) -> None:
    for m in (1, 5):
        response = judge(reward_model, JudgeStepsRequest(steps=steps()[:2], votes=m, temperature=1.2))
        check_judgements(response, 2, m)


def test_model_version_is_stable_without_announcements(reward_model: RewardModelUnderTest) -> None:
    a = judge(reward_model, JudgeStepsRequest(steps=steps()[:1], votes=1))
    b = judge(reward_model, JudgeStepsRequest(steps=steps()[:1], votes=1))
    assert a.model_version == b.model_version == 0


@pytest.mark.parametrize("request_, message", [
    (JudgeStepsRequest(), "steps must hold at least one step"),
    (JudgeStepsRequest(steps=steps(), votes=-1), "votes must be in 0..32"),
    (JudgeStepsRequest(steps=steps(), votes=33), "votes must be in 0..32"),
    (JudgeStepsRequest(steps=steps(), temperature=-0.5), "temperature must be >= 0"),
    (JudgeStepsRequest(steps=[*steps(), StepToJudge(prompt="")]), "steps[3].prompt is empty"),
])
def test_malformed_requests_are_invalid_argument(reward_model: RewardModelUnderTest, request_: JudgeStepsRequest,
                                                 message: str) -> None:
    with pytest.raises(grpc.RpcError) as err:
        judge(reward_model, request_)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in err.value.details()


def test_oracle_votes_are_the_labels_and_deterministic(reward_model: RewardModelUnderTest) -> None:
    if not reward_model.deterministic_oracle:
        pytest.skip("only the oracle judge is deterministic")
    runs = [judge(reward_model, JudgeStepsRequest(steps=steps(), votes=4, temperature=1.5)) for _ in range(2)]
    assert runs[0] == runs[1]
    assert [[v.value for v in j.votes] for j in runs[0].judgements] == [[1] * 4, [-1] * 4, [0] * 4]
    assert [j.mean_vote for j in runs[0].judgements] == [1.0, -1.0, 0.0]


def test_the_command_suite_holds(reward_model: RewardModelUnderTest) -> None:
    from services.contract.reward_contract import check_reward_model

    failed = [r for r in check_reward_model(reward_model.address) if not r.passed]
    assert not failed, "\n".join(f"{r.clause}: sent {r.sent}; got {r.got}; required {r.required}" for r in failed)


def check_a_server_voting(value: int, response: str, kind: str = "step_judge") -> list:
    """`check_reward_model` against a RewardModel on loopback whose every vote is ``value`` with text
    ``response`` (valid requests only; a bad one gets INVALID_ARGUMENT)."""
    from concurrent import futures

    from rlanything.v1.events_pb2 import StepJudgement, Vote
    from services.contract.reward_contract import check_reward_model

    class Fixed(reward_pb2_grpc.RewardModelServicer):
        def JudgeSteps(self, request, context):  # noqa: N802 - the gRPC method's name
            if not request.steps or not 0 <= request.votes <= 32 or request.temperature < 0 or any(
                    not s.prompt for s in request.steps):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad request")
            m = request.votes or 3
            return reward_pb2.JudgeStepsResponse(judgements=[
                StepJudgement(step_index=i, votes=[Vote(value=value, response=response)] * m, mean_vote=float(value))
                for i in range(len(request.steps))])

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    reward_pb2_grpc.add_RewardModelServicer_to_server(Fixed(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        return check_reward_model(f"127.0.0.1:{port}", kind=kind)
    finally:
        server.stop(None)


def test_a_judge_whose_values_contradict_their_text_fails_clause_2_readably() -> None:
    results = check_a_server_voting(-1, "\\boxed{1}")
    assert [r.passed for r in results] == [True, False, True]
    assert results[1].got == "step 0: value -1 for text '\\\\boxed{1}'"
    assert results[1].required == "a value in {+1, -1, 0} that is the text's last \\boxed{} vote"


@pytest.fixture(scope="module")
def unit_test_writer(contract_nats, contract_dir, tiny_model) -> Iterator[str]:
    """The reward service as a unit-test writer (reward.kind: unit_tests) over the tiny random model."""
    import yaml

    from services.common.nats_server import free_port
    from tests.conftest import ServiceProcess

    port = free_port()
    path = contract_dir / f"reward-unit-tests-{port}.yaml"
    path.write_text(yaml.safe_dump({
        "nats": {"url": contract_nats.url},
        "env": {"families": [{"type": "code", "knobs": {"ops": 1}}]},
        "critic": {"unit_tests": True},
        "reward": {"role": "judge", "kind": "unit_tests", "votes": 3, "max_new_tokens": 8,
                   "model": {"source": str(tiny_model)}, "server": {"grpc_port": port}}}))
    proc = ServiceProcess("reward", path, f"127.0.0.1:{port}").start()
    yield proc.address
    proc.stop()


def test_a_unit_test_writer_holds_the_contract_of_its_kind(unit_test_writer: str) -> None:
    from services.contract.reward_contract import check_reward_model

    failed = [r for r in check_reward_model(unit_test_writer, kind="unit_tests") if not r.passed]
    assert not failed, "\n".join(f"{r.clause}: sent {r.sent}; got {r.got}; required {r.required}" for r in failed)
    response = reward_pb2_grpc.RewardModelStub(grpc.insecure_channel(unit_test_writer)).JudgeSteps(
        JudgeStepsRequest(steps=[StepToJudge(step_id="t/0", task_text="Read x and print x + 1.", prompt="p",
                                             response="\\boxed{print(int(input()) + 1)}")], votes=2), timeout=120)
    (judgement,) = response.judgements
    assert judgement.judge_prompt.startswith("Read x and print x + 1.") and "INPUT => OUTPUT" in judgement.judge_prompt
    assert len(judgement.votes) == 2 and all(v.response_token_ids for v in judgement.votes)


def test_a_test_writer_whose_values_contradict_its_tests_fails_clause_2_readably() -> None:
    results = check_a_server_voting(0, "\\boxed{1 => 2}", kind="unit_tests")
    assert [r.passed for r in results] == [True, False, True]
    assert results[1].required == "1 when the text's last \\boxed{} is a test INPUT => OUTPUT, else 0"
