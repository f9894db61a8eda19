"""Run the G episodes of a rollout job in lock-step with batched generation (loop 1).

Each step, the prompts of all live episodes go to the generator in one batch; answers are
parsed (`prompting.parse_action_index`); actions go to the environment concurrently. An answer
that cannot be parsed is recorded with ``valid=False`` and handled by ``invalid_action``:

* ``noop`` (default): the environment is not called, the observation stays (with a note saying
  the answer was invalid), and the step counts against the step budget;
* ``end_episode``: the episode ends there as a loss.

Never "index 0": an invalid answer never turns into an action.

Who answers is an `Agent`: the policy's generator (`GeneratorAgent`, one batched call per step;
`MergedAgent`, whose steps share generate calls with the other jobs played at the same time)
or a scripted player such as the cold start's expert (`services.offline.expert.ExpertAgent`).
Every episode of the project, RL rollouts and expert demonstrations alike, is played by this
one loop, so the prompts a model is trained on are the prompts it is asked in RL.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from rlanything.v1 import env_pb2
from rlanything.v1.events_pb2 import CodeCheck, RolloutJob, Trajectory, TrajectoryStep

from services.common.models.generation import Chat, Completion, Generator, Sampling, Seeds, generate_async
from services.common.models.merging import MergingGenerator
from services.policy.env_clients import EnvClient
from services.common.answers import last_boxed
from services.common.rounds import trajectory_id
from services.common.seeding import derive_seed
from services.policy.prompting import HistoryItem, parse_action_index, single_turn_chat, step_chat

__all__ = ["run_group", "sampling_of", "step_seed", "Agent", "GeneratorAgent", "MergedAgent", "unreachable_version"]


class Agent(Protocol):
    """Answers the chats of the live episodes of a group, one completion per chat, in order."""

    @property
    def model_version(self) -> int:
        """Version of the weights that answered (0 for a scripted player)."""
        ...

    async def answer(self, session_ids: Sequence[str], chats: Sequence[Chat], sampling: Sampling,
                     seeds: Seeds = None) -> list[Completion]:
        """``session_ids[i]`` is the env session whose step ``chats[i]`` asks for; ``seeds[i]`` (when
        given) seeds that chat's sampling alone (see `Generator.generate`)."""
        ...


class GeneratorAgent:
    """A model answers: batched generation (``max_batch`` chats per call) in a worker thread."""

    def __init__(self, generator: Generator, max_batch: int = 64) -> None:
        self.generator = generator
        self.max_batch = max_batch

    @property
    def model_version(self) -> int:
        return self.generator.model_version

    async def answer(self, session_ids: Sequence[str], chats: Sequence[Chat], sampling: Sampling,
                     seeds: Seeds = None) -> list[Completion]:
        completions: list[Completion] = []
        for i in range(0, len(chats), self.max_batch):
            completions += await generate_async(self.generator, chats[i: i + self.max_batch], sampling,
                                                None if seeds is None else seeds[i: i + self.max_batch])
        return completions


class MergedAgent:
    """A model answers through a `MergingGenerator`: concurrent groups share generate calls.

    The version reported is the one that answered this group's latest step; ``last_answer_s`` is
    that step's share of the merged calls' wall time (seconds), which `run_group` records as the
    group's generation time instead of its wait (concurrent groups would each count the same call).
    """

    def __init__(self, merger: MergingGenerator) -> None:
        self.merger = merger
        self._version = merger.generator.model_version
        self.last_answer_s: float | None = None

    @property
    def model_version(self) -> int:
        return self._version

    async def answer(self, session_ids: Sequence[str], chats: Sequence[Chat], sampling: Sampling,
                     seeds: Seeds = None) -> list[Completion]:
        merged = await self.merger.generate(chats, sampling, seeds)
        self._version, self.last_answer_s = merged.model_version, merged.seconds
        return merged.completions


@dataclass
class _Episode:
    index: int
    session_id: str
    task_text: str
    observation: str
    admissible: list[str]
    single_turn: bool
    max_steps: int
    history: list[HistoryItem] = field(default_factory=list)
    steps: list[TrajectoryStep] = field(default_factory=list)
    done: bool = False
    won: bool = False
    truncated: bool = False
    code_check: CodeCheck | None = None


def unreachable_version(min_version: int, latest_announced: int | None) -> str | None:
    """Why a job's ``min_policy_version`` can never be served (pure), or None when it can.

    The scheduler asks only for announced versions; the latest-version record may trail the
    announcement event by one version for a moment, so one ahead is still reachable. A job
    further ahead (a fuzzed or corrupt job) would block a worker for its whole version wait.
    """
    if min_version <= 0:
        return None
    newest = 0 if latest_announced is None else latest_announced  # version 0 (the start) always exists
    if min_version > newest + 1:
        return f"asks for policy version {min_version}, but the newest announced is {newest}"
    return None


def step_seed(episode_seed: int, step: int) -> int:
    """The sampling seed of an episode's ``step``-th answer (pure): derived from the episode's reset
    seed, which the scheduler draws from the run's seed, so a run of one seed samples the same
    answers however its steps were batched."""
    return derive_seed("rollout", int(episode_seed), step)


def sampling_of(job: RolloutJob) -> Sampling:
    """The job's sampling settings (``\\boxed{}`` answers end at the closing brace's stop)."""
    s = job.sampling
    return Sampling(temperature=s.temperature, top_p=s.top_p or 1.0, max_new_tokens=s.max_new_tokens or 64,
                    stop=tuple(s.stop), seed=s.seed or None)


async def run_group(job: RolloutJob, env: EnvClient, player: Generator | Agent, history_steps: int = 2,
                    invalid_action: str = "noop", max_batch: int = 64) -> list[Trajectory]:
    """Play the job's ``group_size`` episodes and return one `Trajectory` each (ids "<job>/<j>").

    ``player`` is a `Generator` (wrapped in a `GeneratorAgent` of ``max_batch``) or any `Agent`.

    Raises:
        grpc.aio.AioRpcError: an env call failed (the job is retried by the consumer).
    """
    agent: Agent = GeneratorAgent(player, max_batch) if isinstance(player, Generator) else player
    sampling = sampling_of(job)
    resets = await asyncio.gather(*(env.reset(job.task, int(seed)) for seed in job.seeds[: job.group_size]))
    episodes = [_Episode(j, r.session_id, r.task_text, r.observation, list(r.admissible_actions), r.single_turn,
                         min(job.max_steps or r.max_steps, r.max_steps) if r.max_steps else job.max_steps,
                         code_check=r.code_check if r.HasField("code_check") else None)
                for j, r in enumerate(resets)]
    generate_s = env_s = 0.0
    version = agent.model_version
    try:
        while live := [e for e in episodes if not e.done]:
            chats = [single_turn_chat(e.task_text) if e.single_turn
                     else step_chat(e.task_text, e.history, e.observation, e.admissible, history_steps) for e in live]
            start = time.perf_counter()
            seeds = [step_seed(job.seeds[e.index], len(e.steps)) for e in live]
            completions = await agent.answer([e.session_id for e in live], chats, sampling, seeds)
            share = getattr(agent, "last_answer_s", None)  # a merged call's share (MergedAgent), else the wait
            generate_s += share if share is not None else time.perf_counter() - start
            version = agent.model_version
            actions: list[str | None] = []
            for e, c in zip(live, completions):
                if e.single_turn:
                    actions.append(last_boxed(c.text))
                else:
                    idx = parse_action_index(c.text, len(e.admissible))
                    actions.append(None if idx is None else e.admissible[idx])
            start = time.perf_counter()
            calls = [env.step(e.session_id, a if a is not None else "") for e, a in zip(live, actions)
                     if a is not None or e.single_turn]
            responses = iter(await asyncio.gather(*calls))
            env_s += time.perf_counter() - start
            for e, c, a, chat in zip(live, completions, actions, chats):
                response: env_pb2.StepResponse | None = next(responses) if (a is not None or e.single_turn) else None
                _record(e, c, a, chat[-1]["content"], response, invalid_action,
                        version if c.model_version is None else c.model_version)
    finally:
        await asyncio.gather(*(env.close(e.session_id) for e in episodes), return_exceptions=True)
    return [Trajectory(trajectory_id=trajectory_id(job.job_id, e.index), job_id=job.job_id, round=job.round, task=job.task,
                       rollout_index=e.index, group_size=job.group_size, task_text=e.task_text, steps=e.steps,
                       outcome=1 if e.won else -1, truncated=e.truncated,
                       policy_version=min((s.served_version for s in e.steps), default=version),
                       generate_s=generate_s, env_s=env_s, is_candidate=job.is_candidate, split=job.split,
                       source="rollout", jobs_in_round=job.jobs_in_round,
                       candidate_check=job.candidate_check if job.HasField("candidate_check") else None,
                       code_check=e.code_check)
            for e in episodes]


def _record(e: _Episode, c, action: str | None, prompt: str,
            response: env_pb2.StepResponse | None, invalid_action: str, version: int) -> None:
    step = TrajectoryStep(index=len(e.steps), prompt=prompt, response=c.text, prompt_token_ids=c.prompt_token_ids,
                          response_token_ids=c.token_ids, behaviour_logprobs=c.logprobs, action=action or "",
                          valid=action is not None, observation=e.observation,
                          response_truncated=c.finish_reason == "length", served_version=version)
    if action is not None and not e.single_turn:
        step.action_index = e.admissible.index(action)
    else:
        step.action_index = -1
    if response is None:  # invalid multi-step answer
        note = f"Your answer {c.text.strip()[:80]!r} was not a valid \\boxed{{i}} with i in 1..{len(e.admissible)}."
        step.next_observation = f"{note}\n{e.observation}"
        e.steps.append(step)
        if invalid_action == "end_episode" or len(e.steps) >= e.max_steps:
            e.done, e.truncated = True, invalid_action != "end_episode"
        return
    step.next_observation = response.observation
    step.oracle_label = response.oracle_label
    step.env_reward = response.reward
    e.steps.append(step)
    if not e.single_turn:
        e.history.append(HistoryItem(e.observation, action or ""))
    e.observation = response.observation
    e.admissible = list(response.admissible_actions)
    e.won = response.won
    e.done = response.terminated or response.truncated or len(e.steps) >= e.max_steps
    e.truncated = response.truncated or (not response.terminated and len(e.steps) >= e.max_steps)
