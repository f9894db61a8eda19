"""Neutral sampling in the `hf` backend: a checkpoint's generation_config.json never changes what is sampled.

The backend samples with the request's temperature and top_p and neutral values for everything
else (no repetition penalty, no top-k, ...), the convention of the `vllm` backend, so behaviour
log-probs describe what was sampled whichever backend served it. The vLLM side of the parity is in
tests/vllm_backend/test_vllm_neutral_sampling.py.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
import torch

from services.common.models.generation import HFGenerator, Sampling

pytestmark = pytest.mark.integration

CHATS = [[{"role": "user", "content": "Task: walk"}],
         [{"role": "user", "content": "Task: a much longer prompt that forces left padding of the first"}]]
HOSTILE = {"repetition_penalty": 1.5, "top_k": 3, "top_p": 0.5, "temperature": 0.1, "min_p": 0.3,
           "typical_p": 0.4, "no_repeat_ngram_size": 2, "min_new_tokens": 8, "do_sample": True}


def hostile_copy(src: Path, dst: Path) -> Path:
    """``src`` with a generation_config.json that would change every sampled token if it were applied."""
    shutil.copytree(src, dst)
    config = json.loads((dst / "generation_config.json").read_text())
    (dst / "generation_config.json").write_text(json.dumps({**config, **HOSTILE}))
    return dst


@pytest.fixture(scope="module")
def pair(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[HFGenerator, HFGenerator]:
    hostile = hostile_copy(tiny_model_dir, tmp_path_factory.mktemp("hostile") / "model")
    return HFGenerator(str(tiny_model_dir)), HFGenerator(str(hostile))


def test_a_hostile_generation_config_changes_no_greedy_token_or_logprob(pair) -> None:
    plain, hostile = pair
    greedy = Sampling(temperature=0.0, max_new_tokens=24)
    a, b = plain.generate(CHATS, greedy), hostile.generate(CHATS, greedy)
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    assert all(len(c.token_ids) > 2 for c in a)
    for x, y in zip(a, b):
        assert torch.allclose(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-6)


def test_a_hostile_generation_config_changes_no_sampled_token(pair) -> None:
    plain, hostile = pair
    seeded = Sampling(temperature=1.0, max_new_tokens=24, seed=7)
    assert plain.generate(CHATS, seeded) == hostile.generate(CHATS, seeded)
    unseeded = Sampling(temperature=1.0, max_new_tokens=24)  # transformers' own sampler, torch's global generator
    torch.manual_seed(11)
    a = plain.generate(CHATS, unseeded)
    torch.manual_seed(11)
    b = hostile.generate(CHATS, unseeded)
    assert [c.token_ids for c in a] == [c.token_ids for c in b]


def test_hf_sampling_has_no_top_k(pair) -> None:
    """transformers' default top_k=50 is off: at temperature 1 a near-uniform tiny model samples
    tokens ranked below 50 (the `vllm` backend has no top-k either)."""
    plain, _ = pair
    torch.manual_seed(5)
    outs = plain.generate(CHATS * 4, Sampling(temperature=1.0, max_new_tokens=24))
    ranks = []
    for c in outs:
        ids = torch.tensor([list(c.prompt_token_ids) + list(c.token_ids)])
        with torch.no_grad():
            logits = plain.model(ids).logits[0, len(c.prompt_token_ids) - 1:-1]
        chosen = logits.gather(-1, ids[0, len(c.prompt_token_ids):].unsqueeze(-1))
        ranks += (logits > chosen).sum(-1).tolist()
    assert max(ranks) >= 50, f"no sampled token ranked beyond 50 in {len(ranks)} tokens: top-k is on"


def test_each_engine_logs_its_sampling_convention_once(tiny_model_dir: Path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="rlanything.models")
    gen = HFGenerator(str(tiny_model_dir))
    gen.generate(CHATS, Sampling(temperature=0.0, max_new_tokens=4))
    gen.load_version(str(tiny_model_dir), 1)
    records = [r for r in caplog.records if r.getMessage() == "sampling convention"]
    assert len(records) == 1
    assert (records[0].backend, records[0].logprobs_mode, records[0].repetition_penalty, records[0].top_k) == \
        ("hf", "raw_logprobs", 1.0, 0)
