"""What the tests of tests/vllm_backend share: the tiny base checkpoint, the chats, greedy sampling,
the `hf` backend's answers and the memory in use."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import psutil
import torch

from services.common.models.generation import HFGenerator, Sampling
from services.common.models.tiny import build_tiny_model, train_tokenizer

TEXT = ["You are on a frozen lake. Tiles: S F H G. Move left down right up; answer \\boxed{0} to \\boxed{3}.",
        "Room: a kitchen with a fridge and a table. Take the apple, open the door, go east, go west."]
CHATS = [
    [{"role": "user", "content": "Tiles S F H G. Move?"}],
    [{"role": "system", "content": "Answer \\boxed{i}."}, {"role": "user", "content": "open the door"}],
    [{"role": "user", "content": "go east"}, {"role": "assistant", "content": "\\boxed{2}"},
     {"role": "user", "content": "take the apple"}],
    [{"role": "user", "content": "kitchen fridge table"}],
]
GREEDY = Sampling(temperature=0.0, max_new_tokens=16)


def build_base(directory: Path) -> Path:
    """The tiny Qwen2-style model every test starts from (2 layers, hidden 128, 320-token vocabulary)."""
    tokenizer = train_tokenizer(TEXT * 40, vocab_size=320)
    return build_tiny_model(tokenizer, directory, hidden_size=128, layers=2, heads=4, max_positions=512)


def hf_greedy(path: Path) -> list[tuple[int, ...]]:
    """Greedy token ids of `CHATS` under the `hf` backend (full weights, or a LoRA adapter over its base)."""
    return [c.token_ids for c in HFGenerator(str(path)).generate(CHATS, GREEDY)]


def _rss(process: psutil.Process) -> int:
    """Resident bytes of ``process``; 0 once it has exited (a previous test's engine may still be
    exiting when the process list is taken)."""
    try:
        return process.memory_info().rss
    except psutil.NoSuchProcess:
        return 0


def rss_mib(processes: Iterable[psutil.Process] | None = None) -> float:
    """Resident memory of ``processes`` (default: this process and every process under it, the engine
    core included), MiB; on a CUDA host plus the GPU memory in use (device-wide), so a leak on either
    side shows."""
    me = psutil.Process()
    host = sum(_rss(p) for p in (processes if processes is not None else [me, *me.children(recursive=True)]))
    if torch.cuda.is_available():
        free, total = torch.cuda.mem_get_info()
        host += total - free
    return host / 2**20
