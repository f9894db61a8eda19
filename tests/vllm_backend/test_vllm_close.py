"""`VLLMGenerator.close` ends the engine's own processes: the policy and reward services call it when they
stop (their process ends with ``os._exit``, so nothing else would), and an engine core left behind kept
600 MB (bench/streaming.md)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
pytest.importorskip("vllm")

import psutil  # noqa: E402

from services.common.models.vllm_engine import VLLMGenerator  # noqa: E402
from tests.vllm_backend.tiny import CHATS, GREEDY, build_base  # noqa: E402

pytestmark = pytest.mark.vllm


def test_close_ends_every_process_the_engine_started(tmp_path: Path) -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    gen = VLLMGenerator(str(build_base(tmp_path / "v0")), dtype="float32", max_model_len=512, enforce_eager=True,
                        gpu_memory_utilization=0.3)
    # multiprocessing's resource tracker is this process's, not the engine's: it ends when this process does
    started = [p for p in psutil.Process().children(recursive=True)
               if p.pid not in before and "resource_tracker" not in " ".join(p.cmdline())]
    assert started, "the engine started no process of its own (nothing for close to end)"
    assert len(gen.generate(CHATS[:1], GREEDY)) == 1
    gen.close()
    deadline = time.monotonic() + 10
    while alive := [(p.pid, p.name(), " ".join(p.cmdline())[:120]) for p in started if _alive(p)]:
        assert time.monotonic() < deadline, f"still running 10 s after close: {alive}"
        time.sleep(0.2)


def _alive(process: psutil.Process) -> bool:
    """Running and not a zombie (an exited child its parent has not reaped yet)."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
