"""The RewardModel contract (proto/rlanything/v1/reward.proto), as clauses run against any judge:

1. JudgeSteps answers one judgement per step, in request order (``step_index``), with exactly m
   votes when the request asks for m (the same count for every step when it asks for the
   service's default), and a model version ≥ 0.
2. Every vote's value is +1, −1 or 0 and agrees with its text (strict last-``\\boxed{}``
   parsing, `services.reward.votes.parse_vote`; for a unit-test writer, ``kind="unit_tests"``: +1
   when the text holds a test, `services.common.unit_tests.parse_unit_test`, else 0); ``mean_vote``
   is the mean of the values (invalid votes count 0); token ids and behaviour log-probs have equal
   lengths when present.
3. Malformed requests are INVALID_ARGUMENT: no steps, votes outside 0..32, a negative
   temperature, a step with an empty prompt.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from rlanything.v1 import reward_pb2, reward_pb2_grpc
from rlanything.v1.events_pb2 import STEP_LABEL_BAD, STEP_LABEL_GOOD

from services.common.unit_tests import parse_unit_test
from services.contract.clauses import ClauseFailed, Result, call, refused, run_clauses, show
from services.reward.votes import parse_vote

__all__ = ["check_reward_model", "CLAUSES"]

_PROMPT = ("Task: reach G.\nNow: S F F\nA H F\nF F G\nActions:\n1. left\n2. down\n3. right\n4. up\n"
           "Answer as \\boxed{i}.")
STEPS = [reward_pb2.StepToJudge(step_id="c/0", task_text="Reach G.", prompt=_PROMPT, response="\\boxed{2}",
                                next_observation="You moved down.", oracle_label=STEP_LABEL_GOOD),
         reward_pb2.StepToJudge(step_id="c/1", task_text="Reach G.", prompt=_PROMPT, response="\\boxed{3}",
                                next_observation="You fell into a hole.", oracle_label=STEP_LABEL_BAD)]


@dataclass
class _Run:
    stub: reward_pb2_grpc.RewardModelStub
    timeout_s: float
    kind: str = "step_judge"


def _value_of(kind: str, text: str) -> int:
    """What a vote's value must be for its text: the verdict, or (a unit-test writer) 1 for a test."""
    return (1 if parse_unit_test(text) is not None else 0) if kind == "unit_tests" else parse_vote(text)


def _judge(run: _Run, votes: int) -> tuple[reward_pb2.JudgeStepsRequest, reward_pb2.JudgeStepsResponse]:
    request = reward_pb2.JudgeStepsRequest(steps=STEPS, votes=votes, temperature=1.0)
    return request, call(run.stub.JudgeSteps, request, run.timeout_s)


def one_judgement_per_step(run: _Run) -> None:
    for m in (0, 1, 5):
        request, response = _judge(run, m)
        if [j.step_index for j in response.judgements] != list(range(len(STEPS))):
            raise ClauseFailed(show(request), show(response), f"one judgement per step ({len(STEPS)}), in order")
        counts = {len(j.votes) for j in response.judgements}
        if (m and counts != {m}) or len(counts) != 1 or 0 in counts:
            raise ClauseFailed(show(request), f"votes per step: {[len(j.votes) for j in response.judgements]}",
                               f"exactly {m} votes per step" if m else "the service's default m (> 0) for every step")
        if response.model_version < 0:
            raise ClauseFailed(show(request), show(response), "model_version >= 0")


def votes_agree_with_their_text(run: _Run) -> None:
    request, response = _judge(run, 3)
    for j in response.judgements:
        values = [v.value for v in j.votes]
        for v in j.votes:
            if v.value not in (-1, 0, 1) or _value_of(run.kind, v.response) != v.value:
                raise ClauseFailed(show(request), f"step {j.step_index}: value {v.value} for text {v.response!r}",
                                   "1 when the text's last \\boxed{} is a test INPUT => OUTPUT, else 0"
                                   if run.kind == "unit_tests" else
                                   "a value in {+1, -1, 0} that is the text's last \\boxed{} vote")
            if v.behaviour_logprobs and len(v.behaviour_logprobs) != len(v.response_token_ids):
                raise ClauseFailed(show(request), f"step {j.step_index}: {len(v.response_token_ids)} token ids, "
                                   f"{len(v.behaviour_logprobs)} log-probs", "one log-prob per token id (or none)")
        if abs(j.mean_vote - sum(values) / max(1, len(values))) > 1e-6:
            raise ClauseFailed(show(request), f"step {j.step_index}: mean_vote {j.mean_vote} for values {values}",
                               "mean_vote = the mean of the vote values (invalid votes count 0)")


def refuses_malformed_requests(run: _Run) -> None:
    ia = {grpc.StatusCode.INVALID_ARGUMENT}
    for request, what in [(reward_pb2.JudgeStepsRequest(), "no steps"),
                          (reward_pb2.JudgeStepsRequest(steps=STEPS, votes=-1), "votes = -1"),
                          (reward_pb2.JudgeStepsRequest(steps=STEPS, votes=33), "votes = 33"),
                          (reward_pb2.JudgeStepsRequest(steps=STEPS, temperature=-0.5), "a negative temperature"),
                          (reward_pb2.JudgeStepsRequest(steps=[*STEPS, reward_pb2.StepToJudge(prompt="")]),
                           "a step with an empty prompt")]:
        refused(run.stub.JudgeSteps, request, ia, f"INVALID_ARGUMENT for {what}", run.timeout_s)


CLAUSES = [
    ("1. One judgement per step, in order, with m votes", one_judgement_per_step),
    ("2. Votes agree with their text; mean_vote is their mean", votes_agree_with_their_text),
    ("3. Malformed requests are INVALID_ARGUMENT", refuses_malformed_requests),
]


def check_reward_model(address: str, timeout_s: float = 120.0, kind: str = "step_judge") -> list[Result]:
    """Run every clause against the RewardModel server at ``address`` (host:port), in order; ``kind``
    is what it writes (``reward.kind``: step_judge or unit_tests).

    Raises:
        ValueError: an unknown ``kind``.
    """
    if kind not in ("step_judge", "unit_tests"):
        raise ValueError(f"kind must be step_judge or unit_tests, got {kind!r}")
    with grpc.insecure_channel(address) as channel:
        return run_clauses(CLAUSES, _Run(reward_pb2_grpc.RewardModelStub(channel), timeout_s, kind))
