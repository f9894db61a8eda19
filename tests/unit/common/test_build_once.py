"""`build_once`: a cache entry asked for by several processes at once is built once.

Reproduces the crash of three seeds started side by side on an empty cold-start cache: the second
build's rename failed with "Directory not empty".
"""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from services.common.build_once import build_once


def _slow_build(log: Path):
    def build(tmp: Path) -> None:
        with log.open("a") as f:
            f.write("built\n")
        tmp.mkdir(parents=True, exist_ok=True)
        time.sleep(2.0)  # the other process asks while this one builds (a loaded CI machine may start it late)
        (tmp / "config.json").write_text("{}")
    return build


def _worker(out: str, log: str, waited: str, start) -> None:
    start.wait(30)  # both processes ask at the same moment
    cached = build_once(Path(out), _slow_build(Path(log)), on_wait=lambda: Path(waited).touch())
    with Path(log).open("a") as f:
        f.write(f"cached={cached}\n")


def test_two_processes_at_once_build_the_entry_once(tmp_path):
    out, log = tmp_path / "cache" / "model", tmp_path / "log.txt"
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    procs = [ctx.Process(target=_worker, args=(str(out), str(log), str(tmp_path / f"waited{i}"), start))
             for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    lines = log.read_text().splitlines()
    assert lines.count("built") == 1
    assert sorted(line for line in lines if line.startswith("cached=")) == ["cached=False", "cached=True"]
    assert len(list(tmp_path.glob("waited*"))) == 1  # the one that waited was told so
    assert (out / "config.json").exists()
    assert not out.with_name("model.tmp").exists()


def test_a_stale_tmp_from_a_dead_build_is_replaced(tmp_path):
    out = tmp_path / "model"
    stale = tmp_path / "model.tmp"
    stale.mkdir()
    (stale / "half-written.bin").write_text("x")
    assert build_once(out, _slow_build(tmp_path / "log.txt")) is False
    assert sorted(p.name for p in out.iterdir()) == ["config.json"]
    assert build_once(out, _slow_build(tmp_path / "log.txt")) is True
    assert (tmp_path / "log.txt").read_text().count("built") == 1


def test_a_failed_build_leaves_nothing_and_the_next_call_builds(tmp_path):
    out = tmp_path / "model"

    def boom(tmp: Path) -> None:
        tmp.mkdir()
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        build_once(out, boom)
    assert not out.exists()
    assert build_once(out, _slow_build(tmp_path / "log.txt")) is False
    assert (out / "config.json").exists()
