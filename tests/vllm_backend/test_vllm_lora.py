"""The `vllm` backend serving LoRA versions in place, on a tiny base and adapters the test builds.

Runs in `make test-vllm` with test_vllm_engine.py (skipped where vLLM is not installed). The adapters
are made the trainer's way (`with_lora` over the base, then ``save_pretrained`` as `save_checkpoint`
does: the adapter alone, the base's path in its config), with random non-zero B matrices (N(0, 0.5²), seeded by the version)
so that each version answers differently from the base and from the version before. ONE engine,
started with LoRA, takes the 5 versions in turn; after each, its greedy tokens are compared with a
fresh engine started on the base with that adapter alone, and with transformers + peft.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache for the CPU build
pytest.importorskip("vllm")
pytest.importorskip("peft")

import psutil  # noqa: E402
import torch  # noqa: E402

from services.common.config import LoraSettings  # noqa: E402
from services.common.models.loading import load_model  # noqa: E402
from services.common.models.lora import with_lora  # noqa: E402
from services.common.models.vllm_engine import VLLMGenerator  # noqa: E402
from tests.vllm_backend.tiny import CHATS, GREEDY, build_base, hf_greedy, rss_mib  # noqa: E402

pytestmark = pytest.mark.vllm
VERSIONS = 5
RANK = 8
ENGINE = {"dtype": "float32", "max_model_len": 512, "enforce_eager": True, "gpu_memory_utilization": 0.3}
"""Engine settings of every engine here (fp32 as the CPU trainer)."""


def make_adapter(base: Path, root: Path, version: int, rank: int = RANK) -> Path:
    """Adapter version ``version`` over ``base`` as the trainer saves it (``root/policy/v<version>``),
    its B matrices drawn from N(0, 0.5²) with seed ``version`` (peft starts them at zero).

    Written as `services.common.checkpoints.save_checkpoint` writes it (that module needs nats-py,
    which the vLLM virtualenv does not have)."""
    model, tokenizer = load_model(str(base))
    torch.manual_seed(version)
    lora = with_lora(model, LoraSettings(rank=rank, alpha=2.0 * rank), base)
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.5)
    out = root / "policy" / f"v{version}"
    lora.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_base(tmp_path_factory.mktemp("vllm-lora") / "base")


@pytest.fixture(scope="module")
def adapters(base: Path) -> list[Path]:
    return [make_adapter(base, base.parent, k) for k in range(1, VERSIONS + 1)]


@pytest.fixture(scope="module")
def engine(base: Path, figures: dict[str, str]) -> Iterator[VLLMGenerator]:
    started = time.perf_counter()
    gen = VLLMGenerator(str(base), max_lora_rank=RANK, **ENGINE)
    figures["LoRA engine start (s; enable_lora, max_lora_rank 8)"] = f"{time.perf_counter() - started:.1f}"
    yield gen
    gen.close()


def greedy(gen: VLLMGenerator) -> list[tuple[int, ...]]:
    return [c.token_ids for c in gen.generate(CHATS, GREEDY)]


def fresh_greedy(base: Path, adapter: Path, version: int) -> list[tuple[int, ...]]:
    """Greedy tokens of a new engine started on ``base`` that serves ``adapter`` as its first version."""
    fresh = VLLMGenerator(str(base), max_lora_rank=RANK, **ENGINE)
    try:
        fresh.load_version(str(adapter), version)
        return greedy(fresh)
    finally:
        fresh.close()


def engine_processes() -> list[psutil.Process]:
    return psutil.Process().children(recursive=True)


def test_each_lora_version_is_served_in_place_as_a_fresh_engine_serves_it(
        engine: VLLMGenerator, base: Path, adapters: list[Path], figures: dict[str, str]) -> None:
    processes = engine_processes()
    base_tokens = greedy(engine)
    assert base_tokens == hf_greedy(base)
    assert engine.adapter is None and engine.loaded_adapters() == set()
    switches, first_outputs, memory, previous = [], [], [], base_tokens
    for k, adapter in enumerate(adapters, start=1):
        started = time.perf_counter()
        engine.load_version(str(adapter), k)
        out = greedy(engine)
        first_outputs.append(time.perf_counter() - started)  # new adapter → first generation on it
        switches.append(engine.last_update_s)
        memory.append(rss_mib(processes))
        assert engine.model_version == k
        assert engine.adapter.lora_name == f"v{k}" and engine.adapter.lora_path == str(adapter.resolve())
        assert engine.loaded_adapters() == {engine.adapter.lora_int_id}, "the previous adapter is still loaded"
        assert out == fresh_greedy(base, adapter, k), f"v{k}: in place ≠ a fresh engine on base + adapter"
        assert out == hf_greedy(adapter), f"v{k}: vLLM's greedy tokens differ from transformers + peft"
        assert out != base_tokens, f"v{k} answers as the base does: the check would not see a missed adapter"
        assert out != previous, f"v{k} answers as v{k - 1} did: the check would not see a missed switch"
        previous = out
    assert {p.pid for p in processes} <= {p.pid for p in engine_processes()}  # the same engine throughout
    assert max(switches) < 5.0, switches
    figures[f"LoRA switch in place (s), mean / max of {VERSIONS}"] = \
        f"{sum(switches) / len(switches):.3f} / {max(switches):.3f}"
    figures["new adapter → first greedy batch on it (s), mean"] = f"{sum(first_outputs) / len(first_outputs):.3f}"
    figures[f"LoRA engine processes' memory after switches 1 / {VERSIONS} (MiB; adapters held: 1)"] = \
        f"{memory[0]:.0f} / {memory[-1]:.0f} ({memory[-1] - memory[0]:+.1f})"
    figures["greedy tokens equal to a fresh engine and to transformers + peft, versions checked"] = str(VERSIONS)


def test_full_weights_and_adapters_alternate_on_one_engine(engine: VLLMGenerator, base: Path, adapters: list[Path],
                                                           figures: dict[str, str]) -> None:
    full = base.parent / "full"
    model, tokenizer = load_model(str(base))
    torch.manual_seed(99)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    model.save_pretrained(full)
    tokenizer.save_pretrained(full)
    engine.load_version(str(full), VERSIONS + 1)
    figures["full-weight update in place on the LoRA engine (s)"] = f"{engine.last_update_s:.3f}"
    assert engine.adapter is None and engine.loaded_adapters() == set()
    assert greedy(engine) == hf_greedy(full)
    assert engine.model_version == VERSIONS + 1
    engine.load_version(str(adapters[0]), VERSIONS + 2)  # its base goes back in place before it
    figures["LoRA switch after full weights (s; the base reloaded in place first)"] = f"{engine.last_update_s:.3f}"
    assert greedy(engine) == hf_greedy(adapters[0])
    assert engine.model_version == VERSIONS + 2
    assert engine.loaded_adapters() == {engine.adapter.lora_int_id}


def test_an_adapter_the_engine_cannot_serve_is_refused_and_the_version_kept(
        engine: VLLMGenerator, base: Path, tmp_path: Path) -> None:
    served, adapter = engine.model_version, engine.adapter
    wide = make_adapter(base, tmp_path, 40, rank=2 * RANK)
    with pytest.raises(ValueError, match=r"rank must be in 1\.\.8"):
        engine.load_version(str(wide), 40)
    assert engine.model_version == served and engine.adapter is adapter
