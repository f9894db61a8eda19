"""MergingGenerator: concurrent calls with equal sampling share generate calls (fake generator)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from rlanything.v1.events_pb2 import RolloutJob, SamplingParams, TaskRef

from services.common.models.generation import Chat, Completion, Generator, Sampling
from services.common.models.merging import MergingGenerator
from services.env.families.base import TaskSpec
from services.env.families.frozenlake import FrozenLakeFamily
from services.offline.local_env import LocalEnvClient
from services.policy.rollout import MergedAgent, run_group


class Echo(Generator):
    """Answers each chat with its own content; records every call's batch size; fails on 'poison'."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def generate(self, chats: Sequence[Chat], sampling: Sampling, cancel=None, seeds=None) -> list[Completion]:
        self.calls.append(len(chats))
        if any(c[-1]["content"] == "poison" for c in chats):
            raise ValueError("poison chat")
        return [Completion(c[-1]["content"], (1,), (2,), (-0.5,), "stop") for c in chats]


def chat(text: str) -> Chat:
    return [{"role": "user", "content": text}]


def test_concurrent_calls_share_one_generate_call_and_get_their_own_answers_in_order() -> None:
    gen = Echo()
    merger = MergingGenerator(gen, max_batch=64)

    async def main() -> list[list[str]]:
        outs = await asyncio.gather(*(merger.generate([chat(f"{i}.{j}") for j in range(i + 1)], Sampling(0.8))
                                      for i in range(5)))
        assert all(o.seconds >= 0 for o in outs)
        return [[c.text for c in o.completions] for o in outs]

    texts = asyncio.run(main())
    assert texts == [[f"{i}.{j}" for j in range(i + 1)] for i in range(5)]
    assert gen.calls == [15]  # 1 + 2 + 3 + 4 + 5 chats in one call


def test_merged_calls_are_split_at_max_batch_and_different_sampling_is_never_merged() -> None:
    gen = Echo()
    merger = MergingGenerator(gen, max_batch=4)

    async def main() -> None:
        await asyncio.gather(merger.generate([chat("a")] * 3, Sampling(0.8)),
                             merger.generate([chat("b")] * 3, Sampling(0.8)),
                             merger.generate([chat("c")] * 2, Sampling(0.0)))

    asyncio.run(main())
    assert sorted(gen.calls) == [2, 2, 4]  # 6 chats at 0.8 in chunks of 4 + 2; the greedy call alone


def test_a_call_the_backend_cannot_handle_fails_alone() -> None:
    gen = Echo()
    merger = MergingGenerator(gen)

    async def main():
        return await asyncio.gather(merger.generate([chat("ok")], Sampling()),
                                    merger.generate([chat("poison")], Sampling()), return_exceptions=True)

    ok, bad = asyncio.run(main())
    assert [c.text for c in ok.completions] == ["ok"]
    assert isinstance(bad, ValueError)


def test_groups_played_at_once_through_a_merged_agent_share_each_step() -> None:
    """Eight one-episode jobs (held-out style) on real FrozenLake maps: each step is one call."""
    spec = TaskSpec("gym_text", {"size": 4, "hole_prob": 0.2}, 3)
    env = LocalEnvClient({"gym_text": FrozenLakeFamily()}, lambda ref: spec)

    class Down(Echo):
        def generate(self, chats, sampling, cancel=None, seeds=None):
            self.calls.append(len(chats))
            return [Completion("\\boxed{1}", (1,), (2,), (-0.5,), "stop") for _ in chats]

    gen = Down()
    agent = MergedAgent(MergingGenerator(gen))
    jobs = [RolloutJob(job_id=f"j{k}", task=TaskRef(slot_id="s", family="gym_text"), group_size=1, seeds=[k],
                       max_steps=3, sampling=SamplingParams(temperature=0.8, max_new_tokens=4)) for k in range(8)]

    async def main():
        return await asyncio.gather(*(run_group(j, env, agent) for j in jobs))

    groups = asyncio.run(main())
    assert all(len(g) == 1 and 1 <= len(g[0].steps) <= 3 for g in groups)
    assert gen.calls[0] == 8  # the first step of all eight episodes in one call
    assert len(gen.calls) <= 3  # at most max_steps calls, not 8 x steps


def test_max_batch_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_batch must be >= 1, got 0"):
        MergingGenerator(Echo(), max_batch=0)


def test_time_shares_of_concurrent_calls_add_up_to_the_merged_call_once() -> None:
    """Four callers of a 0.2 s call: shares by chat count (1:1:2:4 of 8), summing to ~0.2 s, not 4 × 0.2."""
    import time

    class Slow(Echo):
        def generate(self, chats, sampling, cancel=None, seeds=None):
            time.sleep(0.2)
            return super().generate(chats, sampling, cancel)

    merger = MergingGenerator(Slow())

    async def main():
        return await asyncio.gather(*(merger.generate([chat("x")] * n, Sampling()) for n in (1, 1, 2, 4)))

    outs = asyncio.run(main())
    shares = [o.seconds for o in outs]
    assert 0.19 <= sum(shares) <= 0.4
    assert shares[3] == pytest.approx(4 * shares[0]) and shares[2] == pytest.approx(2 * shares[0])


def test_per_chat_seeds_travel_with_their_chats_into_the_merged_call() -> None:
    class Seeded(Echo):
        def __init__(self) -> None:
            super().__init__()
            self.seeds: list[list[int | None] | None] = []

        def generate(self, chats, sampling, cancel=None, seeds=None):
            self.seeds.append(None if seeds is None else list(seeds))
            return super().generate(chats, sampling, cancel)

    gen = Seeded()
    merger = MergingGenerator(gen, max_batch=3)

    async def main() -> None:
        await asyncio.gather(merger.generate([chat("a"), chat("b")], Sampling(0.8), seeds=[1, 2]),
                             merger.generate([chat("c")], Sampling(0.8)),
                             merger.generate([chat("d"), chat("e")], Sampling(0.8), seeds=[4, 5]))
        await merger.generate([chat("f")], Sampling(0.8))
        with pytest.raises(ValueError, match="1 seeds for 2 chats"):
            await merger.generate([chat("g"), chat("h")], Sampling(0.8), seeds=[1])

    asyncio.run(main())
    assert gen.seeds == [[1, 2, None], [4, 5], None]  # chunks of 3; an unseeded call alone passes None


def test_an_episodes_answers_are_seeded_by_its_reset_seed_and_step_whatever_group_it_is_in() -> None:
    """The same episode seed in a job of 1 and in a job of 3 asks for the same seeds step by step."""
    from services.policy.rollout import step_seed

    spec = TaskSpec("gym_text", {"size": 4, "hole_prob": 0.2}, 3)
    env = LocalEnvClient({"gym_text": FrozenLakeFamily()}, lambda ref: spec)

    class Right(Echo):
        def __init__(self) -> None:
            super().__init__()
            self.seeds: list[int] = []

        def generate(self, chats, sampling, cancel=None, seeds=None):
            self.seeds += list(seeds or [])
            return [Completion("\\boxed{3}", (1,), (2,), (-0.5,), "stop") for _ in chats]

    def job(seeds: list[int]) -> RolloutJob:
        return RolloutJob(job_id="j", task=TaskRef(slot_id="s", family="gym_text"), group_size=len(seeds),
                          seeds=seeds, max_steps=2, sampling=SamplingParams(temperature=0.8, max_new_tokens=4))

    alone, together = Right(), Right()
    asyncio.run(run_group(job([42]), env, alone))
    asyncio.run(run_group(job([7, 42, 9]), env, together))
    assert alone.seeds == [step_seed(42, 0), step_seed(42, 1)][: len(alone.seeds)] and alone.seeds
    assert set(alone.seeds) <= set(together.seeds)
    assert step_seed(42, 0) != step_seed(42, 1) != step_seed(7, 1)
