"""The policy and reward services free their generation backends when they stop: a backend with processes of its own
(vLLM's engine core) must not outlive the service, whose process ends with ``os._exit`` (no interpreter
finalizers run there)."""

from __future__ import annotations

from collections.abc import Sequence

from services.common.models.generation import Chat, Completion, Generator, Sampling
from services.policy.service import PolicyService


class ClosingGenerator(Generator):
    def __init__(self) -> None:
        self.closed = 0

    def generate(self, chats: Sequence[Chat], sampling: Sampling, cancel=None, seeds=None) -> list[Completion]:
        raise AssertionError("not called")

    def close(self) -> None:
        self.closed += 1


async def test_stopping_the_policy_service_closes_its_generator() -> None:
    service = PolicyService.__new__(PolicyService)  # on_stop's state without a model or NATS
    service.generator, service.learner, service.serves = ClosingGenerator(), None, False
    await service.on_stop()
    assert service.generator.closed == 1



async def test_stopping_the_reward_service_closes_its_judges_generator() -> None:
    from services.reward.judges import LLMJudge
    from services.reward.service import RewardService

    service = RewardService.__new__(RewardService)
    service.learner, service.judge = None, LLMJudge(ClosingGenerator())
    await service.on_stop()
    assert service.judge.generator.closed == 1
