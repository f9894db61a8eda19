"""The product example of docs/live-usage.md, run as a newcomer would: `rlanything up
configs/live.yaml`, then `python examples/live_product.py` against the printed endpoints."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from services.common.bus import EventBus
from services.common.config import ConsumerConfig, NatsConfig
from tests.launch import RLANYTHING, wait_for

pytestmark = [pytest.mark.system, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_the_product_example_is_captured_stored_and_redacted(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    up = subprocess.Popen([RLANYTHING, "up", str(ROOT / "configs" / "live.yaml"), "--run-dir", str(run_dir),
                           "--set", "policy.openai_port=0", "--set", "ingest.http_port=0"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        manifest = wait_for(run_dir / "services.json", up, timeout_s=120)
        endpoints = manifest["endpoints"]
        out = subprocess.run([sys.executable, str(ROOT / "examples" / "live_product.py"), endpoints["openai"],
                              endpoints["ingest"], "demo-key-change-me"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        lines = {line.split(":", 1)[0]: line for line in out.stdout.splitlines()}  # one line each (answer as repr)
        assert lines["captured"].startswith("captured: queued | answer:")
        assert "STATUS_ACCEPTED" in lines["episode"] and "STATUS_APPLIED" in lines["feedback"]
        assert "'state': 'STATE_CLOSED'" in lines["state"] and "'redactions': {'EMAIL': 1}" in lines["state"]
        assert len(out.stdout.splitlines()) == 4, out.stdout

        async def stored() -> tuple[dict[str, int], bytes]:
            bus = await EventBus.connect(NatsConfig(url=manifest["nats_url"]), ConsumerConfig(), name="check")
            for _ in range(100):  # the capture is published in the background, after the answer
                info = await bus.js.stream_info("INGEST", subjects_filter="rla.ingest.>")
                if len(info.state.subjects or {}) >= 3:
                    break
                await asyncio.sleep(0.1)
            sub = await bus.js.subscribe("rla.ingest.>", stream="INGEST", ordered_consumer=True)
            data = b"".join([(await sub.next_msg(timeout=5)).data for _ in range(info.state.messages)])
            await bus.close()
            return info.state.subjects, data

        subjects, data = asyncio.run(stored())
        kinds = sorted(subject.rsplit(".", 1)[0] if subject.startswith("rla.ingest.completion.") else subject
                       for subject in subjects)
        assert kinds == ["rla.ingest.completion.demo", "rla.ingest.episode.demo", "rla.ingest.feedback.demo"]
        assert b"jane@example.org" not in data and b"<EMAIL_1>" in data
    finally:
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=30) == 0
