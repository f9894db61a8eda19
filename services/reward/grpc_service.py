"""gRPC `RewardModel.JudgeSteps`: synchronous scoring of steps with m votes each."""

from __future__ import annotations

import grpc
from rlanything.v1 import reward_pb2, reward_pb2_grpc

from services.common.errors import InvalidArgumentError
from services.common.grpc_runtime import map_errors
from services.reward.batcher import JudgeBatcher

__all__ = ["RewardModelServicer", "SERVICE_NAME", "MAX_VOTES", "MAX_STEPS", "validate_request"]

SERVICE_NAME = reward_pb2.DESCRIPTOR.services_by_name["RewardModel"].full_name
MAX_VOTES = 32
"""Votes per step one request may ask for."""
MAX_STEPS = 1024
"""Steps one request may hold."""


def validate_request(request: reward_pb2.JudgeStepsRequest, default_votes: int,
                     default_temperature: float) -> tuple[int, float]:
    """The request's (votes, temperature), with 0 meaning the service default; ``greedy`` gives
    temperature 0 (greedy votes) whatever the default.

    Raises:
        InvalidArgumentError: no steps or more than `MAX_STEPS`; votes outside 0..`MAX_VOTES`;
            a negative temperature, or greedy with a temperature; a step with an empty prompt (the
            message names the field).
    """
    if not request.steps:
        raise InvalidArgumentError("steps must hold at least one step to judge")
    if len(request.steps) > MAX_STEPS:
        raise InvalidArgumentError(f"at most {MAX_STEPS} steps per request, got {len(request.steps)}; split it")
    if not 0 <= request.votes <= MAX_VOTES:
        raise InvalidArgumentError(f"votes must be in 0..{MAX_VOTES} (0 = the service default), got {request.votes}")
    if request.temperature < 0:
        raise InvalidArgumentError(f"temperature must be >= 0 (0 = the service default), got {request.temperature}")
    if request.greedy and request.temperature:
        raise InvalidArgumentError(f"greedy asks for temperature 0; the request also sets temperature "
                                   f"{request.temperature:g}: send one of them")
    for i, step in enumerate(request.steps):
        if not step.prompt.strip():
            raise InvalidArgumentError(f"steps[{i}].prompt is empty; send the agent's step prompt")
    if request.greedy:
        return request.votes or default_votes, 0.0
    return request.votes or default_votes, request.temperature or default_temperature


class RewardModelServicer(reward_pb2_grpc.RewardModelServicer):
    """JudgeSteps over the service's judge (requests share generate batches with the workers)."""

    def __init__(self, batcher: JudgeBatcher, default_votes: int, default_temperature: float) -> None:
        self.batcher = batcher
        self.default_votes = default_votes
        self.default_temperature = default_temperature

    @map_errors
    async def JudgeSteps(self, request: reward_pb2.JudgeStepsRequest, context: grpc.aio.ServicerContext
                         ) -> reward_pb2.JudgeStepsResponse:
        votes, temperature = validate_request(request, self.default_votes, self.default_temperature)
        judged = await self.batcher.judge_steps(list(request.steps), votes, temperature)
        return reward_pb2.JudgeStepsResponse(judgements=judged.judgements, model_version=judged.model_version)
