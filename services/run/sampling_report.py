"""The run report's sampling section: each engine's full sampling setting and log-prob mode (pure)."""

from __future__ import annotations

from services.common.config.run import RunConfig
from services.common.models.sampling_convention import NEUTRAL, describe

__all__ = ["sampling_section"]


def sampling_section(config: RunConfig) -> list[str]:
    """Markdown lines: for the policy (temperature and top_p of ``env.scheduler``) and the judge
    (``reward.temperature``, top_p 1), the backend, every sampling field and the log-prob mode.

    Every field the config does not set is neutral in every backend; the checkpoint's
    generation_config.json is not applied (`services.common.models.sampling_convention`).
    """
    rows = [("policy", describe(config.policy.model.backend, config.env.scheduler.temperature,
                                config.env.scheduler.top_p))]
    if config.reward.backend == "llm":
        rows.append(("judge", describe(config.reward.model.backend, config.reward.temperature, 1.0)))
    fields = ["temperature", "top_p", *NEUTRAL]
    lines = ["## Sampling", "",
             "Each engine samples with the settings below: the run config's temperature and top_p, every other "
             "field neutral (the same in the `hf` and `vllm` backends; a checkpoint's generation_config.json is "
             "not applied). Behaviour log-probs: the sampled token's log-prob at temperature 1, before any "
             "processor (`raw_logprobs`). top_k 0, min_p 0 and typical_p 1 are off; temperature 0 is greedy.", "",
             "| engine | backend | log-prob mode | " + " | ".join(fields) + " |",
             "|---|---|---|" + "---:|" * len(fields)]
    for name, d in rows:
        lines.append(f"| {name} | {d['backend']} | {d['logprobs_mode']} | " + " | ".join(str(d[f]) for f in fields) + " |")
    return lines + [""]
