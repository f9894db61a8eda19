"""Judge backends and the micro-batcher, with a scripted `Generator` (a double of our ABC, no mocks)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from rlanything.v1.events_pb2 import (STEP_LABEL_BAD, STEP_LABEL_GOOD, STEP_LABEL_UNSPECIFIED, StepJudgement,
                                      Trajectory, TrajectoryStep)
from rlanything.v1.reward_pb2 import StepToJudge
from services.common.config import RewardServiceConfig
from services.common.models.generation import Chat, Completion, Generator, Sampling
from services.reward.batcher import JudgeBatcher
from services.reward.judges import Judge, JudgeSettings, LLMJudge, OracleJudge, build_judge, steps_of


class ScriptedGenerator(Generator):
    """Answers from a cycle of texts; records every call's batch size and sampling."""

    def __init__(self, answers: Sequence[str], with_tokens: bool = True) -> None:
        self.answers = list(answers)
        self.with_tokens = with_tokens
        self.calls: list[tuple[int, Sampling]] = []
        self.seeds: list[int | None] = []
        self.n = 0

    def generate(self, chats: Sequence[Chat], sampling: Sampling, cancel=None, seeds=None) -> list[Completion]:
        self.calls.append((len(chats), sampling))
        self.seeds += list(seeds) if seeds is not None else [None] * len(chats)
        out = []
        for chat in chats:
            text = self.answers[self.n % len(self.answers)]
            self.n += 1
            tokens = tuple(range(len(text))) if self.with_tokens else ()
            prompt = (len(chat[-1]["content"]),) if self.with_tokens else ()
            out.append(Completion(text, prompt, tokens, tuple(-0.5 for _ in text), "stop"))
        return out


def step(label: int = STEP_LABEL_GOOD, prompt: str = "Now: here") -> StepToJudge:
    return StepToJudge(step_id="s", task_text="Reach G.", prompt=prompt, response="\\boxed{2}",
                       next_observation="You moved down.", oracle_label=label)


def test_llm_judge_m_votes_per_step_in_order_batched() -> None:
    gen = ScriptedGenerator(["ok \\boxed{1}", "\\boxed{-1}", "hmm", "\\boxed{+1}"])
    judge = LLMJudge(gen, JudgeSettings(max_batch=4, max_new_tokens=7))
    out = judge.judge([step(prompt=f"Now: {i}") for i in range(3)], votes=3, temperature=0.8)
    assert [n for n, _ in gen.calls] == [4, 4, 1]  # 9 chats in calls of at most max_batch
    assert gen.calls[0][1] == Sampling(temperature=0.8, top_p=1.0, max_new_tokens=7)
    assert [j.step_index for j in out] == [0, 1, 2]
    assert [[v.value for v in j.votes] for j in out] == [[1, -1, 0], [1, 1, -1], [0, 1, 1]]
    assert [j.mean_vote for j in out] == pytest.approx([0.0, 1 / 3, 2 / 3])
    assert "Now: 1" in out[1].judge_prompt and out[1].prompt_token_ids == [len(out[1].judge_prompt)]
    v = out[0].votes[0]
    assert v.response == "ok \\boxed{1}" and len(v.response_token_ids) == len(v.behaviour_logprobs) == len(v.response)
    assert judge.trainable and judge.model_version == 0


def test_each_vote_is_seeded_by_the_runs_seed_its_step_id_and_its_index() -> None:
    from services.common.seeding import derive_seed

    def seeds_of(ids: list[str], seed: int) -> list[int | None]:
        gen = ScriptedGenerator(["\\boxed{1}"])
        steps = [StepToJudge(step_id=i, prompt="Now: x", response="\\boxed{2}") for i in ids]
        LLMJudge(gen, JudgeSettings(max_batch=4, seed=seed)).judge(steps, votes=2, temperature=0.8)
        return gen.seeds

    both = seeds_of(["t/0", "t/1"], 5)
    assert both == [derive_seed("judge", 5, "t/0", 0), derive_seed("judge", 5, "t/0", 1),
                    derive_seed("judge", 5, "t/1", 0), derive_seed("judge", 5, "t/1", 1)]
    assert seeds_of(["t/1"], 5) == both[2:]  # batched with other steps or not: the same draws
    assert seeds_of(["t/1"], 6) != both[2:]  # another run seed, other draws
    assert seeds_of([""], 5) == [None, None]  # a step without an id is not seeded


def test_llm_judge_without_token_ids_keeps_no_logprobs() -> None:
    judge = LLMJudge(ScriptedGenerator(["\\boxed{1}"], with_tokens=False), trainable=False)
    (j,) = judge.judge([step()], votes=2, temperature=1.0)
    assert [v.value for v in j.votes] == [1, 1] and not j.prompt_token_ids
    assert all(not v.response_token_ids and not v.behaviour_logprobs for v in j.votes)


def test_oracle_judge_votes_the_labels() -> None:
    out = OracleJudge().judge([step(STEP_LABEL_GOOD), step(STEP_LABEL_BAD), step(STEP_LABEL_UNSPECIFIED)], 3, 0.8)
    assert [[v.value for v in j.votes] for j in out] == [[1, 1, 1], [-1, -1, -1], [0, 0, 0]]
    assert [j.mean_vote for j in out] == [1.0, -1.0, 0.0]
    assert [v.response for v in out[1].votes] == ["\\boxed{-1}"] * 3
    assert OracleJudge().trainable is False


def test_build_judge_by_backend() -> None:
    assert isinstance(build_judge(RewardServiceConfig(backend="oracle"), ""), OracleJudge)
    remote = build_judge(RewardServiceConfig(backend="openai", model={"openai_base_url": "http://127.0.0.1:9/v1"}), "")
    assert isinstance(remote, LLMJudge) and not remote.trainable


def test_steps_of_a_trajectory() -> None:
    t = Trajectory(trajectory_id="r0/a/1", task_text="Reach G.", steps=[
        TrajectoryStep(index=0, prompt="p0", response="\\boxed{1}", next_observation="o1", oracle_label=STEP_LABEL_BAD),
        TrajectoryStep(index=1, prompt="p1", response="\\boxed{2}", next_observation="o2")])
    out = steps_of(t)
    assert [s.step_id for s in out] == ["r0/a/1/0", "r0/a/1/1"]
    assert (out[0].task_text, out[0].prompt, out[0].response, out[0].next_observation, out[0].oracle_label) == (
        "Reach G.", "p0", "\\boxed{1}", "o1", STEP_LABEL_BAD)


class CountingJudge(Judge):
    """Oracle votes, counting the calls and the steps of each."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[int] = []
        self.fail = fail

    def judge(self, steps: Sequence[StepToJudge], votes: int, temperature: float) -> list[StepJudgement]:
        self.calls.append(len(steps))
        if self.fail:
            raise RuntimeError("model exploded")
        return OracleJudge().judge(steps, votes, temperature)


async def test_batcher_merges_concurrent_requests_into_one_call() -> None:
    judge = CountingJudge()
    batcher = JudgeBatcher(judge, wait_s=0.01)
    a, b, c = await asyncio.gather(batcher.judge_steps([step(STEP_LABEL_GOOD)] * 2, 3, 0.8),
                                   batcher.judge_steps([step(STEP_LABEL_BAD)] * 3, 3, 0.8),
                                   batcher.judge_steps([step(STEP_LABEL_BAD)], 2, 0.8))  # other m: own call
    assert judge.calls == [5, 1]
    assert [j.step_index for j in a.judgements] == [0, 1] and [j.step_index for j in b.judgements] == [0, 1, 2]
    assert [j.mean_vote for j in a.judgements + b.judgements] == [1.0, 1.0, -1.0, -1.0, -1.0]
    assert len(c.judgements[0].votes) == 2 and a.model_version == 0


async def test_batcher_fails_the_requests_of_a_failed_call() -> None:
    batcher = JudgeBatcher(CountingJudge(fail=True), wait_s=0.0)
    with pytest.raises(RuntimeError, match="model exploded"):
        await batcher.judge_steps([step()], 3, 0.8)
    batcher.judge = CountingJudge()  # the batcher keeps working after a failure
    assert (await batcher.judge_steps([step()], 1, 0.8)).judgements[0].mean_vote == 1.0


async def test_a_request_whose_caller_gave_up_is_not_judged() -> None:
    """The batchers' reconciled rule (`services.common.microbatch`): a caller cancelled while its request
    waits is dropped from the merged call (the judge used to vote on its steps for nobody)."""
    judge = CountingJudge()
    batcher = JudgeBatcher(judge, wait_s=0.05)
    gone = asyncio.create_task(batcher.judge_steps([step()] * 4, 3, 0.8))
    kept = asyncio.create_task(batcher.judge_steps([step(STEP_LABEL_BAD)] * 2, 3, 0.8))
    await asyncio.sleep(0.01)
    gone.cancel()
    assert [j.mean_vote for j in (await kept).judgements] == [-1.0, -1.0]
    assert judge.calls == [2]  # only the waiting caller's steps


class PoisonJudge(CountingJudge):
    """Fails any call that holds a step whose prompt is ``POISON`` (a trajectory the judge cannot handle)."""

    def judge(self, steps: Sequence[StepToJudge], votes: int, temperature: float) -> list[StepJudgement]:
        self.calls.append(len(steps))
        if any(s.prompt == "POISON" for s in steps):
            raise ValueError("cannot judge this step")
        return OracleJudge().judge(steps, votes, temperature)


async def test_a_poison_request_fails_alone_and_its_batch_mates_are_judged() -> None:
    """Regression (issue: field bugs, 1): one failing request used to fail every request merged with it."""
    judge = PoisonJudge()
    batcher = JudgeBatcher(judge, wait_s=0.01)
    poison = step(STEP_LABEL_GOOD)
    poison.prompt = "POISON"
    results = await asyncio.gather(batcher.judge_steps([step(STEP_LABEL_GOOD)], 3, 0.8),
                                   batcher.judge_steps([poison, step(STEP_LABEL_GOOD)], 3, 0.8),
                                   batcher.judge_steps([step(STEP_LABEL_BAD)] * 2, 3, 0.8),
                                   batcher.judge_steps([step(STEP_LABEL_GOOD)], 3, 0.8), return_exceptions=True)
    assert isinstance(results[1], ValueError)
    healthy = [r for i, r in enumerate(results) if i != 1]
    assert [[j.mean_vote for j in r.judgements] for r in healthy] == [[1.0], [-1.0, -1.0], [1.0]]
    assert judge.calls[0] == 6  # merged first; then each request alone
    assert sorted(judge.calls[1:]) == [1, 1, 2, 2]
