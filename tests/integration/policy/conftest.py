"""A tiny policy model built once per test session (tokenizer trained on FrozenLake text)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from services.common.nats_server import free_port

from services.common.config import FamilyConfig, TinyModelConfig
from services.env.families.frozenlake import FrozenLakeFamily
from services.offline.policy_sft import build_tiny_for, demonstrations


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised tiny Qwen2 model saved as a Hugging Face directory."""
    fam = FamilyConfig(type="gym_text", knobs={"size": 4, "hole_prob": 0.2})
    demos = demonstrations(FrozenLakeFamily(), fam, 20, history_steps=2)
    return build_tiny_for(demos, tmp_path_factory.mktemp("tiny") / "model", TinyModelConfig(hidden_size=64))


@contextlib.contextmanager
def serving(app: object) -> Iterator[str]:
    """Serve the ASGI ``app`` with uvicorn on a free loopback port (a thread); yields its ``/v1`` URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
