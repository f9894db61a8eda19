"""The local nats-server's fsync policy: what a power loss (not a `kill -9`) can lose.

JetStream writes every acknowledged message to the OS page cache (a killed server loses nothing)
but fsyncs it only every ``sync_interval`` (2 minutes by default): a power loss can lose that much
acknowledged data. `rlanything up`/`run` start their server with ``launcher.nats_sync_interval``
(``always`` by default: fsync before each acknowledgement).
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from services.common.config import load_config
from services.common.errors import ConfigError
from services.common.nats_server import NatsServer, free_port
from services.run.launcher import Launcher

pytestmark = pytest.mark.integration


def jetstream_sync(server: NatsServer) -> tuple[int, bool]:
    """(sync_interval in ns, sync_always) as the running server reports them on /varz."""
    varz = json.load(urllib.request.urlopen(f"http://127.0.0.1:{server.monitor_port}/varz", timeout=5))
    config = varz["jetstream"]["config"]
    return config["sync_interval"], bool(config.get("sync_always", False))


def test_nats_server_defaults_to_an_fsync_every_2_minutes_and_always_fsyncs_when_asked() -> None:
    with NatsServer(monitor_port=free_port()) as default:
        assert jetstream_sync(default) == (120 * 10**9, False)
    with NatsServer(sync_interval="always", monitor_port=free_port()) as always:
        assert jetstream_sync(always)[1] is True
    with NatsServer(sync_interval="10s", monitor_port=free_port()) as ten:
        assert jetstream_sync(ten) == (10 * 10**9, False)


def test_the_launchers_server_fsyncs_every_write_by_default(tmp_path: Path) -> None:
    launcher = Launcher(load_config(None, []), tmp_path)
    (tmp_path / "logs").mkdir()
    launcher.start_nats()
    try:
        assert launcher.nats is not None and launcher.nats.sync_interval == "always"
        assert "sync_interval: always" in (launcher.nats.store_dir / "nats-server.conf").read_text()
    finally:
        launcher.stop()
    with pytest.raises(ConfigError, match="launcher.nats_sync_interval"):
        load_config(None, ["launcher.nats_sync_interval=sometimes"])
