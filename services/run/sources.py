"""Model sources for services started on this machine: fill every empty ``model.source``.

Services serve prepared models only (`services.common.models.source.require_source`); before
`rlanything up`/`run` starts them, an empty source becomes the family's tiny model
(`services.offline.bootstrap`, random weights, built once into the cache). `rlanything run`
cold-starts them by SFT first (`services.run.coldstart`), so nothing is left empty here.
"""

from __future__ import annotations

from services.common.config import RunConfig

__all__ = ["needs_policy_source", "needs_judge_source", "fill_tiny_sources"]


def needs_policy_source(config: RunConfig) -> bool:
    """Does the policy load weights that the config does not name?"""
    return not config.policy.model.source and config.policy.model.backend != "openai"


def needs_judge_source(config: RunConfig) -> bool:
    """Does the judge load weights that the config does not name?"""
    return (config.reward.backend == "llm" and not config.reward.model.source
            and config.reward.model.backend != "openai")


def fill_tiny_sources(config: RunConfig, services: list[str]) -> None:
    """Set an empty policy / judge ``model.source`` (of the services about to start) to the tiny
    model built for ``env.families[0]`` — or, for the policy, to ``policy.sft.source`` when the config
    names a pretrained model to cold-start (served as it is: only `rlanything run` fine-tunes it);
    mutates ``config``."""
    from services.offline.bootstrap import tiny_judge, tiny_policy

    family = config.env.families[0]
    history = config.policy.rollout.history_steps
    if "policy" in services and needs_policy_source(config):
        config.policy.model.source = (config.policy.sft.source
                                      or tiny_policy(config.policy.model, family, history))
    if "reward" in services and needs_judge_source(config):
        config.reward.model.source = tiny_judge(config.reward, family, history)
