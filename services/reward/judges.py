"""Implementations of the reward model: m votes per step (arXiv 2602.02488, docs/algorithm.md loop 2).

Selected by config ``reward.backend``:

* ``llm`` (default) — the generative judge (`LLMJudge` over the hf/vllm generation backend):
  every step is rendered with `judge_prompt.judge_chat`, sampled m times at the vote
  temperature, and parsed strictly (`votes.parse_vote`). Votes carry token ids and behaviour
  log-probs, so the critic's consistency rewards can train it.
* ``oracle`` — votes are the environment's step labels (GOOD → m × +1, BAD → m × −1,
  UNSPECIFIED → m invalid votes): an upper bound for ablations; never trained.
* ``openai`` — `LLMJudge` over an external OpenAI-compatible server: same prompt and parsing,
  but no token ids, so it is never trained.

With ``reward.kind: unit_tests`` the llm and openai backends are a `UnitTestWriter` instead: each
vote is a unit test of the step's code task (docs/coding.md).

Judges are synchronous and batch internally (at most ``max_batch`` chats per generate call);
`batcher.JudgeBatcher` merges concurrent requests into one call.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rlanything.v1.events_pb2 import StepJudgement, Trajectory, Vote
from rlanything.v1.reward_pb2 import StepToJudge

from services.common.config import RewardServiceConfig
from services.common.models.generation import Generator, Sampling
from services.common.models.factory import build_generator
from services.common.rounds import step_id
from services.common.seeding import derive_seed
from services.common.unit_tests import parse_unit_test, unit_test_chat
from services.reward.judge_prompt import BAD_VERDICT, GOOD_VERDICT, chat_judge_chat, judge_chat
from services.reward.votes import label_vote, mean_vote, parse_vote

__all__ = ["JudgeSettings", "Judge", "LLMJudge", "UnitTestWriter", "OracleJudge", "build_judge", "steps_of"]


@dataclass(frozen=True)
class JudgeSettings:
    """How an LLM judge renders and samples (see `RewardServiceConfig` for each knob)."""

    prompt_chars: int = 600
    field_chars: int = 300
    max_new_tokens: int = 48
    """Tokens per vote."""
    max_batch: int = 64
    """Chats (steps × votes) per generate call."""
    seed: int = 0
    """The run's seed: vote v of step ``step_id`` samples with ``derive_seed("judge", seed, step_id, v)``,
    so its draw does not depend on the steps it was batched with (steps without an id: unseeded)."""

    @classmethod
    def of(cls, cfg: RewardServiceConfig, seed: int = 0) -> "JudgeSettings":
        """The settings in the reward service's config, votes seeded from the run's ``seed``."""
        return cls(cfg.prompt_chars, cfg.field_chars, cfg.max_new_tokens, cfg.max_batch, seed)


class Judge(ABC):
    """A reward model: judges steps with m votes each."""

    model_version: int = 0
    """Version of the weights that vote (0 for judges without versions)."""
    trainable: bool = False
    """Whether its votes carry the token ids the RM trainer needs."""

    @abstractmethod
    def judge(self, steps: Sequence[StepToJudge], votes: int, temperature: float) -> list[StepJudgement]:
        """One `StepJudgement` per step, in order, with exactly ``votes`` votes each.

        ``step_index`` is the step's position in ``steps``; ``mean_vote`` is S̄ (invalid = 0).
        """

    def load_version(self, path: str, version: int) -> None:
        """Vote with checkpoint ``path`` as ``version`` from the next call on (default: no weights)."""
        self.model_version = version

    def close(self) -> None:
        """Free the judge's backend (`Generator.close`); called once when the reward service stops.
        Default: nothing to free."""


class LLMJudge(Judge):
    """A generative judge over any `Generator` (hf, vllm, or an OpenAI-compatible server)."""

    def __init__(self, generator: Generator, settings: JudgeSettings = JudgeSettings(), trainable: bool = True) -> None:
        self.generator = generator
        self.settings = settings
        self.trainable = trainable

    @property
    def model_version(self) -> int:  # type: ignore[override]  # read-only: the generator's version
        return self.generator.model_version

    def load_version(self, path: str, version: int) -> None:
        self.generator.load_version(path, version)

    def close(self) -> None:
        self.generator.close()

    def judge(self, steps: Sequence[StepToJudge], votes: int, temperature: float) -> list[StepJudgement]:
        s = self.settings
        chats = [chat_judge_chat(x.prompt, x.response, x.next_observation, s.prompt_chars, s.field_chars)
                 if x.rubric == "chat" else
                 judge_chat(x.task_text, x.prompt, x.response, x.next_observation, s.prompt_chars, s.field_chars)
                 for x in steps]
        return self._vote(steps, chats, votes, temperature, "judge", parse_vote)

    def _vote(self, steps: Sequence[StepToJudge], chats: list[list[dict[str, str]]], votes: int, temperature: float,
              seed_tag: str, value_of: Callable[[str], int]) -> list[StepJudgement]:
        """``votes`` completions of each step's chat (each seeded from ``seed_tag``, the run's seed and
        the step id; calls of at most ``max_batch`` chats), each vote's value ``value_of`` its text."""
        s = self.settings
        flat = [chat for chat in chats for _ in range(votes)]
        seeds = [derive_seed(seed_tag, s.seed, x.step_id, v) if x.step_id else None for x in steps for v in range(votes)]
        sampling = Sampling(temperature=temperature, top_p=1.0, max_new_tokens=s.max_new_tokens)
        completions = []
        for i in range(0, len(flat), s.max_batch):
            completions += self.generator.generate(flat[i: i + s.max_batch], sampling, None, seeds[i: i + s.max_batch])
        out = []
        for k, chat in enumerate(chats):
            mine = completions[k * votes: (k + 1) * votes]
            vote_list = [Vote(value=value_of(c.text), response=c.text, response_token_ids=c.token_ids,
                              behaviour_logprobs=c.logprobs if c.token_ids else ()) for c in mine]
            out.append(StepJudgement(step_index=k, judge_prompt=chat[-1]["content"],
                                     prompt_token_ids=mine[0].prompt_token_ids if mine else (), votes=vote_list,
                                     mean_vote=mean_vote([v.value for v in vote_list])))
        return out


class UnitTestWriter(LLMJudge):
    """The reward model as a unit-test writer (``reward.kind: unit_tests``, CURE arXiv 2506.03136): for
    each step (a code task's answer) it writes m tests of the task (`unit_tests.unit_test_chat` on the
    task text), one per vote. A vote's value is +1 when its answer holds a test in the format, 0 when
    not (the critic runs the tests and scores them; `critic.unit_test_eval`)."""

    def judge(self, steps: Sequence[StepToJudge], votes: int, temperature: float) -> list[StepJudgement]:
        chats = [unit_test_chat(x.task_text) for x in steps]
        return self._vote(steps, chats, votes, temperature, "tests",
                          lambda text: 1 if parse_unit_test(text) is not None else 0)


class OracleJudge(Judge):
    """Votes = the environment's oracle step label, m times (deterministic; reads no text)."""

    trainable = False
    _TEXT = {1: GOOD_VERDICT, -1: BAD_VERDICT, 0: ""}

    def judge(self, steps: Sequence[StepToJudge], votes: int, temperature: float) -> list[StepJudgement]:
        out = []
        for k, step in enumerate(steps):
            value = label_vote(step.oracle_label)
            out.append(StepJudgement(step_index=k, votes=[Vote(value=value, response=self._TEXT[value])] * votes,
                                     mean_vote=float(value) if votes else 0.0))
        return out


def build_judge(cfg: RewardServiceConfig, source: str, seed: int = 0) -> Judge:
    """The judge of ``cfg.backend``; ``source`` is the llm judge's weights (ignored otherwise);
    ``seed`` (the run's) seeds each vote (`JudgeSettings.seed`).

    Raises:
        ImportError: ``model.backend: vllm`` without the vllm extra installed.
    """
    if cfg.backend == "oracle":
        return OracleJudge()
    settings = JudgeSettings.of(cfg, seed)
    kind = UnitTestWriter if cfg.kind == "unit_tests" else LLMJudge
    if cfg.backend == "openai":
        remote = cfg.model.model_copy(update={"backend": "openai"})
        return kind(build_generator(remote, cfg.model.openai_model or "default"), settings, trainable=False)
    return kind(build_generator(cfg.model, source), settings, trainable=True)


def steps_of(trajectory: Trajectory) -> list[StepToJudge]:
    """The trajectory's steps as judge requests (step ids ``<trajectory_id>/<index>``); a live
    trajectory (source ``ingest``) is judged with the ``chat`` rubric."""
    t = trajectory
    rubric = "chat" if t.source == "ingest" else ""
    return [StepToJudge(step_id=step_id(t.trajectory_id, s.index), task_text=t.task_text, prompt=s.prompt,
                        response=s.response, next_observation=s.next_observation, oracle_label=s.oracle_label,
                        rubric=rubric)
            for s in t.steps]
