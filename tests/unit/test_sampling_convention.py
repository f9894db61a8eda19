"""One sampling convention: the same neutral fields in both backends, recorded in the resolved config
and the run report (pure functions; the generation itself: tests/integration/policy/test_neutral_sampling.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from services.common.config import RunConfig, dump_config
from services.common.models.sampling_convention import (
    LOGPROBS_MODE,
    NEUTRAL,
    describe,
    hf_generate_kwargs,
    sampling_fields,
    token_ids_only,
    vllm_sampling_kwargs,
)
from services.run.report import write_report
from services.run.sampling_report import sampling_section


def test_both_backends_get_the_request_settings_and_neutral_values_for_the_rest() -> None:
    hf = hf_generate_kwargs(0.7, 0.9, sample=True)
    vllm = vllm_sampling_kwargs(0.7, 0.9)
    assert (hf["temperature"], hf["top_p"]) == (vllm["temperature"], vllm["top_p"]) == (0.7, 0.9)
    assert hf["top_k"] is None and vllm["top_k"] == 0 == NEUTRAL["top_k"]  # both: no top-k
    assert hf["repetition_penalty"] == vllm["repetition_penalty"] == NEUTRAL["repetition_penalty"] == 1.0
    assert vllm["presence_penalty"] == vllm["frequency_penalty"] == 0.0 and vllm["min_p"] == 0.0
    assert hf["no_repeat_ngram_size"] == 0 and hf["typical_p"] == 1.0 and hf["num_beams"] == 1
    greedy = hf_generate_kwargs(0.0, 0.5, sample=False)
    assert greedy["do_sample"] is False and vllm_sampling_kwargs(0.0, 0.5)["temperature"] == 0.0
    assert sampling_fields(0.8, 1.0) == {"temperature": 0.8, "top_p": 1.0, **NEUTRAL}


def test_a_checkpoints_generation_config_keeps_its_token_ids_only() -> None:
    from transformers import GenerationConfig

    hostile = GenerationConfig(eos_token_id=[2, 7], pad_token_id=0, bos_token_id=1, repetition_penalty=1.5, top_k=3,
                               do_sample=True, temperature=0.1, no_repeat_ngram_size=2)
    kept = token_ids_only(hostile)
    assert (kept.eos_token_id, kept.pad_token_id, kept.bos_token_id) == ([2, 7], 0, 1)
    assert kept.repetition_penalty in (None, 1.0) and kept.top_k in (None, 0) and not kept.no_repeat_ngram_size
    assert not kept.do_sample and kept.temperature in (None, 1.0)


def test_the_resolved_config_records_the_sampling_defaults_and_the_logprob_mode() -> None:
    resolved = yaml.safe_load(dump_config(RunConfig()))
    for section in ("policy", "reward"):
        assert resolved[section]["model"]["sampling_defaults"] == "neutral"
        assert resolved[section]["model"]["logprobs_mode"] == LOGPROBS_MODE == "raw_logprobs"


def test_the_run_report_lists_each_engines_sampling(tmp_path: Path) -> None:
    config = RunConfig.model_validate({"env": {"scheduler": {"temperature": 0.6}}, "reward": {"temperature": 0.0}})
    lines = sampling_section(config)
    policy = next(x for x in lines if x.startswith("| policy |"))
    judge = next(x for x in lines if x.startswith("| judge |"))
    assert policy.split(" | ")[1:5] == ["hf", "raw_logprobs", "0.6", "1.0"]
    assert judge.split(" | ")[1:5] == ["hf", "raw_logprobs", "0.0", "1.0"]
    assert describe("vllm")["checkpoint_generation_config"] == "ignored"
    report = write_report([{"round": 1.0}], tmp_path, "header", lines).read_text()
    assert "## Sampling" in report and policy in report


def test_a_truncated_nucleus_for_training_rollouts_is_refused_at_config_load() -> None:
    """Behaviour log-probs are the untruncated distribution's: top_p < 1 would bias every ratio."""
    with pytest.raises(ValueError, match=r"env\.scheduler\.top_p=0\.9: rollouts are trained on.*top_p 1"):
        RunConfig.model_validate({"env": {"scheduler": {"top_p": 0.9}}})
    assert RunConfig.model_validate({"env": {"scheduler": {"top_p": 1.0}}}).env.scheduler.top_p == 1.0
