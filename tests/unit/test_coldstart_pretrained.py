"""Cold start of a pretrained policy (`policy.sft.source`): config checks, cache keys, the CLI's exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from services.common.config import RunConfig
from services.run.coldstart import _POOL_ONLY, coldstart_errors, policy_coldstart_dir, policy_needs_coldstart, sft_lora

ROOT = Path(__file__).resolve().parents[2]
FAMILY = {"type": "reasoning_gym", "dataset": "basic_arithmetic", "knobs": {"level": 0}}


def _config(**policy: object) -> RunConfig:
    return RunConfig.model_validate({"env": {"families": [FAMILY]}, "policy": policy,
                                     "launcher": {"coldstart_dir": "/cache/coldstart"}})


def test_a_pretrained_source_is_cold_started_whatever_model_source_says() -> None:
    assert policy_needs_coldstart(_config(sft={"source": "smollm2"}))
    assert policy_needs_coldstart(_config())  # the tiny model
    assert not policy_needs_coldstart(_config(model={"source": "smollm2"}))  # served as it is


def test_a_consistent_config_has_no_errors() -> None:
    assert coldstart_errors(_config(sft={"source": "smollm2", "lora_rank": 8})) == []
    assert coldstart_errors(_config()) == []


@pytest.mark.parametrize(("policy", "launcher", "expected"), [
    ({"sft": {"source": "smollm2"}, "model": {"source": "smollm2"}}, {},
     "policy.sft.source='smollm2' and policy.model.source='smollm2' both name the policy"),
    ({"sft": {"source": "smollm2"}}, {"coldstart": False}, "needs launcher.coldstart: true"),
    ({"sft": {"source": "smollm2"}, "model": {"backend": "openai", "openai_base_url": "http://x/v1"}}, {},
     "needs policy.model.backend 'hf' or 'vllm'"),
    ({"sft": {"lora_rank": 8}}, {}, "policy.sft.lora_rank=8 applies to a pretrained policy.sft.source only"),
])
def test_each_inconsistency_is_named(policy: dict, launcher: dict, expected: str) -> None:
    config = RunConfig.model_validate({"env": {"families": [FAMILY]}, "policy": policy, "launcher": launcher})
    errors = coldstart_errors(config)
    assert len(errors) == 1
    assert expected in errors[0]


def test_the_cache_directory_names_family_and_source_and_hashes_the_sft_settings() -> None:
    base = policy_coldstart_dir(_config(sft={"source": "smollm2", "lora_rank": 8}))
    assert base.parent == Path("/cache/coldstart")
    assert base.name.startswith("policy-reasoning_gym-smollm2-")
    changed = [policy_coldstart_dir(_config(sft={"source": s, "lora_rank": r, "lr": lr, "steps": n}))
               for s, r, lr, n in [("HuggingFaceTB/SmolLM2-135M-Instruct", 8, 1e-3, 300),
                                   ("smollm2", 0, 1e-3, 300), ("smollm2", 16, 1e-3, 300),
                                   ("smollm2", 8, 1e-4, 300), ("smollm2", 8, 1e-3, 30)]]
    assert len({base, *changed}) == 6  # source, rank, lr and steps each change the key
    assert changed[0].name.startswith("policy-reasoning_gym-HuggingFaceTB--SmolLM2-135M-Instruct-")


def test_the_seed_and_the_rl_settings_leave_the_key_alone() -> None:
    base = _config(sft={"source": "smollm2"})
    other = RunConfig.model_validate({**base.model_dump(mode="json"), "seed": 7,
                                      "policy": {**base.policy.model_dump(mode="json"), "ppo": {"lr": 1e-5}}})
    assert policy_coldstart_dir(other) == policy_coldstart_dir(base)


def test_the_adapters_target_modules_count_only_for_a_lora_sft() -> None:
    full = _config(sft={"source": "smollm2"})
    full_other = _config(sft={"source": "smollm2"}, ppo={"lora": {"target_modules": ["q_proj"]}})
    lora = _config(sft={"source": "smollm2", "lora_rank": 8})
    lora_other = _config(sft={"source": "smollm2", "lora_rank": 8}, ppo={"lora": {"target_modules": ["q_proj"]}})
    assert policy_coldstart_dir(full) == policy_coldstart_dir(full_other)
    assert policy_coldstart_dir(lora) != policy_coldstart_dir(lora_other)


def test_the_tiny_models_key_is_unchanged_by_the_new_fields() -> None:
    """The hash of the tiny cold start is that of the SFT config before `source`/`lora_rank` existed, so
    existing cache entries stay valid (value computed from the fields as they were)."""
    from services.run.coldstart import _family_key, config_hash

    config = _config()
    sft_as_before = {"episodes": 600, "steps": 300, "batch_size": 32, "lr": 0.001, "eval_episodes": 100}
    key = config_hash(_family_key(config.env.families[0]), sft_as_before, config.policy.model.tiny,
                      config.policy.rollout.history_steps)
    assert policy_coldstart_dir(config).name == f"policy-reasoning_gym-{key}"


def test_sft_lora_settings_follow_the_rank_and_ppo_target_modules() -> None:
    assert sft_lora(_config(sft={"source": "smollm2"})) is None
    lora = sft_lora(_config(sft={"source": "smollm2", "lora_rank": 8}, ppo={"lora": {"target_modules": ["q_proj"]}}))
    assert lora is not None
    assert (lora.rank, lora.alpha, lora.dropout, lora.target_modules) == (8, 16.0, 0.0, ["q_proj"])


def test_rlanything_run_exits_2_on_an_inconsistent_cold_start_before_building_anything(tmp_path: Path) -> None:
    cache = tmp_path / "coldstart"
    proc = subprocess.run([sys.executable, "-m", "services.cli", "run", "configs/smollm2-cpu.yaml",
                           "--set", "policy.model.source=smollm2", "--set", f"launcher.coldstart_dir={cache}",
                           "--set", f"launcher.runs_dir={tmp_path / 'runs'}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = " ".join((proc.stdout + proc.stderr).split())  # the console wraps long lines
    assert "config error: policy.sft.source='smollm2' and policy.model.source='smollm2' both name the policy" in said
    assert not cache.exists() and not (tmp_path / "runs").exists()


def test_rlanything_up_serves_the_named_pretrained_model_not_a_tiny_one() -> None:
    """`up` does not cold-start; with policy.sft.source and no model.source it serves that model as it is
    (it used to build and serve the tiny model, ignoring the config's model)."""
    from services.run.sources import fill_tiny_sources

    config = _config(sft={"source": "smollm2"})
    fill_tiny_sources(config, ["policy"])
    assert config.policy.model.source == "smollm2"


def test_with_eval_slots_the_seed_picks_the_cold_start_its_tasks_are_kept_apart_from() -> None:
    """The cold start's tasks skip the run's held-out and OOD instances, which the seed picks."""
    def config(seed: int, **family: object) -> RunConfig:
        return RunConfig.model_validate({"seed": seed, "env": {"families": [{**FAMILY, **family}]},
                                         "launcher": {"coldstart_dir": "/cache/coldstart"}})

    held = {"heldout_slots": 100}
    assert policy_coldstart_dir(config(0, **held)) != policy_coldstart_dir(config(1, **held))
    assert policy_coldstart_dir(config(0, **held)) != policy_coldstart_dir(config(0))
    assert policy_coldstart_dir(config(0, **held)) != policy_coldstart_dir(config(0, heldout_slots=50))
    assert policy_coldstart_dir(config(0)) == policy_coldstart_dir(config(1))  # nothing held out: one for all seeds


def test_distractor_ends_episode_keys_the_cold_start_only_when_set() -> None:
    """A family field added later leaves the keys of cold starts cached before it alone (the key of
    the family's fields as they were), and keys a cold start of its own when set."""
    from services.common.config import load_config
    from services.common.config.env import FamilyConfig
    from services.run.coldstart import _family_key

    web = load_config(Path("configs/web.yaml"), [])
    family = web.env.families[0]
    before = family.model_dump(mode="json", exclude={"distractor_ends_episode"} | _POOL_ONLY)
    assert _family_key(family) == before
    ending = load_config(Path("configs/web.yaml"), ["env.families.0.distractor_ends_episode=true"])
    assert _family_key(ending.env.families[0]) == {**before, "distractor_ends_episode": True}
    assert policy_coldstart_dir(ending) != policy_coldstart_dir(web)
    assert FamilyConfig.model_fields["distractor_ends_episode"].default is False
