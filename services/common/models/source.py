"""A service's model source must be given: services serve prepared models, they never build one."""

from __future__ import annotations

from services.common.config import ModelConfig
from services.common.errors import ConfigError

__all__ = ["require_source"]


def require_source(section: str, model: ModelConfig) -> str:
    """``model.source``; the openai backend may leave it empty (it names ``openai_model``).

    Raises:
        ConfigError: ``<section>.model.source`` is empty for a backend that loads weights.
    """
    if model.source or model.backend == "openai":
        return model.source
    raise ConfigError(
        f"{section}.model.source is empty (backend {model.backend!r}): give a Hugging Face directory, a hub id or "
        "'smollm2'. `rlanything up` and `rlanything run` prepare one before starting the services; on Kubernetes "
        "the bootstrap Job writes it to the checkpoint volume (k8s/base/bootstrap.yaml).")
