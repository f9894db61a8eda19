"""Build task families from config (heavy libraries are imported only when used)."""

from __future__ import annotations

from pathlib import Path

from services.common.config import FamilyConfig, SandboxConfig
from services.env.families.base import TaskFamily

__all__ = ["build_family"]


def build_family(cfg: FamilyConfig, cache_dir: str | Path, sandbox: SandboxConfig | None = None) -> TaskFamily:
    """The `TaskFamily` for one family config entry (``cfg.max_steps`` overrides its default);
    ``sandbox`` configures the ``code`` and ``codeio`` families' sandbox (default `SandboxConfig()`; it starts at
    `TaskFamily.start` or its first run, not here).

    Raises:
        InvalidArgumentError: unknown reasoning-gym dataset, or a Gymnasium id that is not registered.
    """
    family: TaskFamily
    if cfg.type == "gym_text":
        from services.env.families.frozenlake import FrozenLakeFamily

        family = FrozenLakeFamily(view=cfg.observation)
    elif cfg.type == "live":
        from services.env.families.live import LiveFamily

        family = LiveFamily()
    elif cfg.type == "remote":
        from services.env.families.remote import RemoteFamily

        family = RemoteFamily(cfg.address)
    elif cfg.type == "gymnasium":
        from services.env.families.gymnasium_family import GymnasiumFamily

        family = GymnasiumFamily(cfg.env_id, cfg.won_when)
    elif cfg.type == "web":
        from services.env.families.web import WebFamily

        family = WebFamily(browsers=cfg.browsers, screenshots=cfg.screenshots,
                           distractor_ends_episode=cfg.distractor_ends_episode)
    elif cfg.type == "code":
        from services.env.families.code_family import CodeFamily

        family = CodeFamily(sandbox)
    elif cfg.type == "codeio":
        from services.env.families.codeio_family import CodeIOFamily

        family = CodeIOFamily(sandbox, Path(cache_dir) / "codeio")
    elif cfg.type == "reasoning_gym":
        from services.env.families.reasoning_gym_family import ReasoningGymFamily

        family = ReasoningGymFamily(cfg.dataset)
    else:
        from services.env.families.textworld_family import TextWorldFamily

        family = TextWorldFamily(cache_dir=Path(cache_dir) / "textworld")
    if cfg.max_steps:
        family.max_steps = cfg.max_steps
    return family
