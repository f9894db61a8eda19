"""`rlanything sft`: the cold start — supervised steps on the environment's expert trajectories.

Builds the tiny model (tokenizer trained on the family's own text) when no source is given, or
loads a pretrained one (``smollm2``, a directory or hub id); trains the response tokens of expert
demonstrations with cross-entropy for a fixed budget (stopping short of mastery, so RL has room),
in full or through LoRA adapters that are merged into the weights afterwards, and measures success
on held-out tasks before and after.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from rlanything.v1.events_pb2 import RolloutJob, SamplingParams, TaskRef
from services.common.config import FamilyConfig, LoraSettings, SFTConfig, TinyModelConfig
from services.common.models.generation import HFGenerator
from services.common.models.loading import resolve_model_path
from services.common.models.merging import MergingGenerator
from services.common.models.tiny import build_tiny_model, train_tokenizer
from services.env.disjoint import disjoint_specs
from services.env.families.base import TaskFamily, TaskSpec
from services.offline.local_env import LocalEnvClient
from services.offline.expert import Demonstration, expert_demonstrations_async, run_sync
from services.policy.rollout import MergedAgent, run_group

__all__ = ["SFTResult", "demonstrations", "build_tiny_for", "supervised_train", "success_rate", "held_out_specs",
           "add_sft_adapters", "merge_sft_adapters"]

log = logging.getLogger("rlanything.sft")
TRAIN_SEED_BASE = 50_000_000
"""Task seeds of SFT data: disjoint from the pool's seeds (base_seed·10^7 + split offset + i)."""
EVAL_SEED_BASE = 60_000_000


@dataclass(frozen=True)
class SFTResult:
    """What a cold start did."""

    model_dir: str
    success_before: float
    success_after: float
    steps: int
    demonstrations: int
    seconds: float


def _specs(cfg: FamilyConfig, n: int, base: int) -> list[TaskSpec]:
    return [TaskSpec(cfg.type, {k: float(v) for k, v in cfg.knobs.items()}, base + i) for i in range(n)]


def held_out_specs(cfg: FamilyConfig, n: int) -> list[TaskSpec]:
    """``n`` tasks with the family's knobs and seeds never used for SFT data or the pool."""
    return _specs(cfg, n, EVAL_SEED_BASE)


def demonstrations(family: TaskFamily, cfg: FamilyConfig, episodes: int, history_steps: int,
                   excluded: frozenset[str] = frozenset()) -> list[Demonstration]:
    """Expert steps of ``episodes`` training tasks of the family: seeds from `TRAIN_SEED_BASE` on,
    skipping those whose instance is in ``excluded`` (the run's held-out and OOD instance keys,
    `services.env.disjoint`).

    Raises:
        EvalInstanceError: too few seeds give an instance outside ``excluded``.
    """
    specs = disjoint_specs(family, cfg.knobs, episodes, TRAIN_SEED_BASE, excluded)

    async def play() -> list[Demonstration]:
        demos: list[Demonstration] = []
        for spec in specs:
            demos.extend(await expert_demonstrations_async(family, spec, history_steps))
        return demos

    return run_sync(play())


def build_tiny_for(demos: Sequence[Demonstration], out_dir: Path, tiny: TinyModelConfig, seed: int = 0) -> Path:
    """A tiny model whose tokenizer is trained on the demonstrations' own text (chat template applied)."""
    from services.common.models.tiny import CHATML_TEMPLATE  # noqa: F401 - documents the format

    texts: list[str] = []
    for d in demos[:5000]:
        texts.extend(m["content"] for m in d.chat)
        texts.append(d.response)
    tokenizer = train_tokenizer(texts, vocab_size=tiny.vocab_size)
    return build_tiny_model(tokenizer, out_dir, tiny.hidden_size, tiny.layers, tiny.heads, seed=seed)


def check_points(steps: int, max_steps: int, every: int) -> list[int]:
    """The step counts after which a cold start with a success target measures success: ``steps``,
    then every ``every`` steps, and ``max_steps`` (the last, whatever the spacing); pure.

    >>> check_points(250, 300, 20)
    [250, 270, 290, 300]
    """
    return sorted({*range(steps, max_steps, every), max_steps})


def supervised_train(generator: HFGenerator, demos: Sequence[Demonstration], cfg: SFTConfig, seed: int = 0,
                     progress: Callable[[int, float], None] | None = None,
                     until: Callable[[int], bool] | None = None, checks: Sequence[int] = ()) -> int:
    """Cross-entropy on response tokens (answer + end of turn), AdamW, ``cfg.steps`` steps; returns
    the steps taken.

    With ``until``: training goes on to the last of ``checks`` (step counts, ascending), and stops
    at the first of them where ``until(steps_taken)`` is True (it is called with the model in eval
    mode). One optimizer throughout, so stopping at step n gives the weights of a run of n steps."""
    model, tok = generator.model, generator.tokenizer
    rng = random.Random(seed)
    encoded = []
    for d in demos:
        prompt = generator.encode_chat(d.chat)
        response = tok.encode(d.response, add_special_tokens=False) + [tok.eos_token_id]
        encoded.append((prompt, response))
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    model.train()
    pending = sorted(checks) if until is not None else []
    limit = pending[-1] if pending else cfg.steps
    step = -1
    for step in range(limit):
        batch = rng.sample(encoded, min(cfg.batch_size, len(encoded)))
        width = max(len(p) + len(r) for p, r in batch)
        ids = torch.full((len(batch), width), tok.pad_token_id)
        labels = torch.full((len(batch), width), -100)
        attn = torch.zeros((len(batch), width), dtype=torch.long)
        for i, (p, r) in enumerate(batch):
            ids[i, : len(p) + len(r)] = torch.tensor(p + r)
            labels[i, len(p): len(p) + len(r)] = torch.tensor(r)
            attn[i, : len(p) + len(r)] = 1
        loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if progress:
            progress(step + 1, float(loss.detach()))
        if pending and step + 1 == pending[0]:
            pending.pop(0)
            model.eval()
            if until(step + 1):  # type: ignore[misc]  # pending is empty without until
                return step + 1
            model.train()
    model.eval()
    return step + 1


def success_rate(generator: HFGenerator, family: TaskFamily, specs: Sequence[TaskSpec], temperature: float = 0.8,
                 group_size: int = 1, history_steps: int = 2, max_new_tokens: int = 16) -> float:
    """Share of episodes won on ``specs`` (each played ``group_size`` times), in-process: up to 16
    jobs at a time, fewer where the family bounds its open episodes (``max_open_episodes``: a job
    opens all its episodes before stepping any, so jobs sharing too few browsers would wait on each
    other for ever).

    Raises:
        ValueError: ``group_size`` exceeds the family's ``max_open_episodes``.
    """
    bound = family.max_open_episodes
    if bound is not None and group_size > bound:
        raise ValueError(f"group_size={group_size} episodes cannot be open at once: the {family.name} family "
                         f"holds max_open_episodes={bound}")
    at_once = 16 if bound is None else max(1, min(16, bound // group_size))
    by_ref = {f"eval-{i}": s for i, s in enumerate(specs)}
    env = LocalEnvClient({family.name: family}, lambda ref: by_ref[ref.slot_id])

    async def play() -> list[int]:
        jobs = [RolloutJob(job_id=slot, task=TaskRef(slot_id=slot, family=family.name), group_size=group_size,
                           seeds=list(range(group_size)), max_steps=family.max_steps,
                           sampling=SamplingParams(temperature=temperature, top_p=1.0, max_new_tokens=max_new_tokens))
                for slot in by_ref]
        outcomes: list[int] = []
        merger = MergingGenerator(generator)  # the steps of jobs played together share generate calls
        for i in range(0, len(jobs), at_once):
            groups = await asyncio.gather(*(run_group(j, env, MergedAgent(merger), history_steps)
                                            for j in jobs[i: i + at_once]))
            outcomes += [t.outcome for g in groups for t in g]
        return outcomes

    outcomes = asyncio.run(play())
    return sum(o == 1 for o in outcomes) / max(1, len(outcomes))


def add_sft_adapters(generator: HFGenerator, lora: LoraSettings, base_path: str, seed: int = 0) -> torch.nn.Module:
    """Fresh LoRA adapters injected into ``generator.model`` in place (its base weights frozen, the
    adapters trainable and computing nothing until trained; their random start drawn from ``seed``);
    returns the peft wrapper that `merge_sft_adapters` takes.

    Raises:
        ValueError: ``lora.rank`` is 0 or no target module matches (`with_lora`).
    """
    from services.common.models.lora import with_lora

    return with_lora(generator.model, lora, base_path, seed=seed)


def merge_sft_adapters(wrapped: torch.nn.Module) -> torch.nn.Module:
    """Fold trained adapters into their base weights (W + B·A·alpha/rank) in place and drop them: the
    generator's model is a plain transformers model again, its weights trainable, saved in full."""
    merged = wrapped.merge_and_unload()  # type: ignore[operator]  # peft's PeftModel
    for param in merged.parameters():
        param.requires_grad_(True)
    return merged


def run_sft(family: TaskFamily, fam_cfg: FamilyConfig, sft: SFTConfig, tiny: TinyModelConfig, out_dir: Path,
            history_steps: int = 2, seed: int = 0, source: str = "",
            progress: Callable[[str, float], None] | None = None, lora: LoraSettings | None = None,
            cache_dir: str = ".cache/models", eval_tokens: int = 16,
            excluded: frozenset[str] = frozenset(), target_success: float = 0.0, max_steps: int = 0,
            check_every: int = 10) -> SFTResult:
    """The whole cold start; saves the trained model to ``out_dir`` (a Hugging Face directory, full weights).

    ``source`` '' builds the tiny model; otherwise it is loaded (`load_model`, cached under
    ``cache_dir``) and fine-tuned in full, or with ``lora`` adapters merged before saving. Success is
    measured on ``sft.eval_episodes`` held-out tasks at temperature 0.8 with ``eval_tokens`` new tokens
    per answer, before and after. The demonstrations skip the instances in ``excluded`` (the run's
    held-out and OOD instance keys: `demonstrations`).

    With ``target_success`` > 0 the training goes past ``sft.steps``: success is measured after
    ``sft.steps`` and every ``check_every`` steps up to ``max_steps`` (`check_points`), and the
    cold start stops at the first measure at or above the target (``success_after`` is that
    measure, on the same tasks, so it is the one that met the target; ``steps`` the steps taken).

    Raises:
        ValueError: the family yields no expert demonstrations for these knobs; ``lora`` without a
            pretrained ``source``.
        OSError: ``source`` cannot be loaded.
    """
    if lora is not None and not source:
        raise ValueError("LoRA SFT needs a pretrained source (the tiny model is fine-tuned in full)")
    start = time.perf_counter()
    demos = demonstrations(family, fam_cfg, sft.episodes, history_steps, excluded)
    if not demos:
        raise ValueError(f"no expert demonstrations for {fam_cfg.type} with knobs {fam_cfg.knobs}")
    base = source or str(build_tiny_for(demos, out_dir, tiny, seed))
    generator = HFGenerator(base, cache_dir)
    specs = held_out_specs(fam_cfg, sft.eval_episodes)
    before = success_rate(generator, family, specs, history_steps=history_steps, max_new_tokens=eval_tokens)
    if progress:
        progress("before", before)
    torch.manual_seed(seed)  # the SFT's and the evaluation's draws
    wrapped = add_sft_adapters(generator, lora, resolve_model_path(base, cache_dir), seed) if lora else None
    measured: dict[int, float] = {}

    def reached(steps: int) -> bool:
        measured[steps] = success_rate(generator, family, specs, history_steps=history_steps,
                                       max_new_tokens=eval_tokens)
        if progress:
            progress("check", measured[steps])
        return measured[steps] >= target_success

    taken = supervised_train(generator, demos, sft, seed, (lambda s, loss: progress("step", s)) if progress else None,
                             until=reached if target_success else None,
                             checks=check_points(sft.steps, max_steps, check_every) if target_success else ())
    if wrapped is not None:
        merge_sft_adapters(wrapped)
    after = measured[taken] if taken in measured else success_rate(generator, family, specs, history_steps=history_steps,
                                                                    max_new_tokens=eval_tokens)
    out_dir.mkdir(parents=True, exist_ok=True)
    generator.model.save_pretrained(out_dir)
    generator.tokenizer.save_pretrained(out_dir)
    return SFTResult(str(out_dir), before, after, taken, len(demos), time.perf_counter() - start)
