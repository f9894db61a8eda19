"""A two-round run config with untrained tiny models on a family that has no oracle to cold-start
from (a Gymnasium id, a remote server): these runs check the plumbing, hence the format guard off."""

from __future__ import annotations

from pathlib import Path

TEMPLATE = """
run_name: NAME
seed: 1
loop: {rounds: 2}
env:
  cache_dir: CACHE/env
  families:
    - FAMILY
  scheduler: {tasks_per_round: 4, group_size: 4, eval_every: 1, eval_group_size: 2, max_new_tokens: 12}
policy:
  openai_port: 0
  model: {threads: 1, cache_dir: CACHE/models, tiny: {hidden_size: 64}}
  ppo: {optimizer_steps: 2}
reward:
  model: {threads: 1, cache_dir: CACHE/models, tiny: {hidden_size: 64}}
  max_new_tokens: 12
  prompt_chars: 300
  field_chars: 150
critic: {group_timeout_s: 120}
launcher: {coldstart: false, round_timeout_s: 600, max_invalid_answer_rate: 1.0}
"""


def untrained_config(tmp_path: Path, name: str, family: str) -> Path:
    """Write the config (``family``: one flow-style YAML mapping) under ``tmp_path``; returns its path."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(TEMPLATE.replace("NAME", name).replace("CACHE", str(tmp_path / "cache")).replace("FAMILY", family))
    return path
