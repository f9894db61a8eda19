"""The `vllm` backend against the `hf` backend and the trainer, on tiny checkpoints the test builds.

Runs in `make test-vllm` (its own virtualenv with vLLM; on this machine the CPU build `vllm-cpu`)
and in `scripts/gpu_check.sh` on a CUDA host; skipped where vLLM is not installed. One engine serves
every test (starting one takes ~30-45 s on 2 cores). Checkpoints: v0 a tiny Qwen2-style model, and
v1..v10 = v0 plus N(0, 0.5²) noise seeded by the version (the recipe of the `hf` hot-swap test in
tests/integration/policy). ``RLA_VLLM_REPORT`` names a markdown file for the measured figures
(conftest.py writes them; test_vllm_lora.py adds its own).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache for the CPU build
pytest.importorskip("vllm")

import psutil  # noqa: E402
import torch  # noqa: E402

from services.common.models.generation import HFGenerator, Sampling, encode_chat  # noqa: E402
from services.common.models.loading import load_model  # noqa: E402
from services.common.models.logprobs import token_logprobs  # noqa: E402
from services.common.models.vllm_engine import VLLMGenerator  # noqa: E402
from tests.vllm_backend.tiny import CHATS, GREEDY, build_base, hf_greedy, rss_mib  # noqa: E402

pytestmark = pytest.mark.vllm
VERSIONS = 10


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("vllm-ckpt")
    base = build_base(root / "v0")
    out = [base]
    for k in range(1, VERSIONS + 1):
        model, tok = load_model(str(base))
        torch.manual_seed(k)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.5)
        model.save_pretrained(root / f"v{k}")
        tok.save_pretrained(root / f"v{k}")
        out.append(root / f"v{k}")
    return out


@pytest.fixture(scope="module")
def engine(checkpoints: list[Path], figures: dict[str, str]) -> Iterator[VLLMGenerator]:
    started = time.perf_counter()
    gen = VLLMGenerator(str(checkpoints[0]), dtype="float32", max_model_len=512, enforce_eager=True,
                        gpu_memory_utilization=0.3)
    figures["engine start (s)"] = f"{time.perf_counter() - started:.1f}"
    yield gen
    gen.close()


def test_greedy_output_follows_each_in_place_update_without_a_restart(engine: VLLMGenerator, checkpoints: list[Path],
                                                                        figures: dict[str, str]) -> None:
    engine_pids = {p.pid for p in psutil.Process().children(recursive=True)}
    assert [c.token_ids for c in engine.generate(CHATS, GREEDY)] == hf_greedy(checkpoints[0])
    updates, first_outputs, memory = [], [], [rss_mib()]
    previous = hf_greedy(checkpoints[0])
    for k in range(1, VERSIONS + 1):
        started = time.perf_counter()
        engine.load_version(str(checkpoints[k]), k)
        out = engine.generate(CHATS, GREEDY)
        first_outputs.append(time.perf_counter() - started)  # new checkpoint → first generation on it
        updates.append(engine.last_update_s)
        memory.append(rss_mib())
        expected = hf_greedy(checkpoints[k])
        assert [c.token_ids for c in out] == expected, f"v{k}: vLLM's greedy tokens differ from transformers'"
        assert expected != previous, f"v{k} answers as v{k - 1} did: the check would not see a missed update"
        previous = expected
        assert engine.model_version == k
    assert {p.pid for p in psutil.Process().children(recursive=True)} == engine_pids  # same engine processes
    assert max(updates) < 5.0, updates
    growth = memory[-1] - memory[1]
    assert growth < 64.0, f"resident memory grew {growth:.0f} MiB over {VERSIONS - 1} updates: {memory}"
    figures["in-place update (s), mean / max of 10"] = f"{sum(updates) / len(updates):.3f} / {max(updates):.3f}"
    figures["new checkpoint → first greedy batch on it (s), mean"] = f"{sum(first_outputs) / len(first_outputs):.3f}"
    figures["memory in use after updates 1 / 10 (MiB; host RSS, + GPU on CUDA)"] = f"{memory[1]:.0f} / {memory[-1]:.0f} ({growth:+.1f})"


def test_behaviour_logprobs_use_the_trainers_convention(engine: VLLMGenerator, checkpoints: list[Path],
                                                        figures: dict[str, str]) -> None:
    engine.load_version(str(checkpoints[3]), 3)
    model, tok = load_model(str(checkpoints[3]))
    temperature = 0.7
    started = time.perf_counter()
    out = engine.generate(CHATS * 4, Sampling(temperature=temperature, max_new_tokens=24, seed=5))
    tokens = sum(len(c.token_ids) for c in out)
    figures["sampling throughput, 16 chats x 24 tokens (tokens/s)"] = f"{tokens / (time.perf_counter() - started):.0f}"
    raw, processed = [], []
    for c in out:
        assert len(c.logprobs) == len(c.token_ids) > 0
        ids = torch.tensor([list(c.prompt_token_ids) + list(c.token_ids)])
        with torch.no_grad():
            recomputed = token_logprobs(model, ids, torch.ones_like(ids))[0, len(c.prompt_token_ids):]
            logits = model(input_ids=ids).logits[0, len(c.prompt_token_ids) - 1:-1].float()
            at_t = torch.log_softmax(logits / temperature, -1).gather(-1, ids[0, len(c.prompt_token_ids):, None])[:, 0]
        behaviour = torch.tensor(c.logprobs)
        raw += (behaviour - recomputed).abs().tolist()
        processed += (behaviour - at_t).abs().tolist()
    mean_raw, mean_processed = sum(raw) / len(raw), sum(processed) / len(processed)
    figures["mean |behaviour − recomputed| per token (nats)"] = f"{mean_raw:.2e} over {len(raw)} tokens"
    figures["the same against temperature-processed log-probs (nats)"] = f"{mean_processed:.2e}"
    assert mean_raw < 1e-3 and max(raw) < 1e-2, (mean_raw, max(raw))
    assert mean_processed > 20 * max(mean_raw, 1e-4)  # the check tells the two conventions apart


def test_prompt_token_ids_are_what_the_trainer_rebuilds(engine: VLLMGenerator, checkpoints: list[Path],
                                                        figures: dict[str, str]) -> None:
    hf = HFGenerator(str(checkpoints[0]))
    out = engine.generate(CHATS, GREEDY)
    from vllm import SamplingParams

    own = engine.llm.chat([list(c) for c in CHATS], SamplingParams(max_tokens=1), use_tqdm=False)
    for chat, completion, vllm_own in zip(CHATS, out, own):
        rebuilt = hf.encode_chat(chat)
        assert list(completion.prompt_token_ids) == rebuilt == encode_chat(hf.tokenizer, chat)
        assert list(vllm_own.prompt_token_ids) == rebuilt  # vLLM's own chat path: no drift, no second BOS
        assert rebuilt.count(rebuilt[0]) == len(chat) + 1  # one <|im_start|> per turn + the generation prompt
    figures["prompt token ids equal to the trainer's, chats checked"] = str(len(CHATS))
