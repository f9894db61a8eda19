"""Build a cached directory once, even when several processes ask for it at the same time.

Two runs started together (three seeds side by side), or two processes of one run building the same
tiny model or converting the same SmolLM2 checkpoint, used to build the same cache entry at once and crash on the rename of
the second build ("Directory not empty"). A file lock beside the entry (the `filelock` library)
lets the first process build it while the others wait, then find it built.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock, Timeout

__all__ = ["build_once"]


def build_once(out: Path, build: Callable[[Path], object], marker: str = "config.json",
               on_wait: Callable[[], None] | None = None) -> bool:
    """Make sure the directory ``out`` exists, built by ``build(tmp)`` at most once across processes.

    ``build`` writes into a fresh ``<out>.tmp`` directory path (it may create it; what it returns is
    ignored), which is renamed to ``out`` when it returns. ``out`` counts as built when ``out/marker`` exists. A ``.tmp`` left
    by a build that died is removed first. ``on_wait`` is called once if another process holds the
    lock (so the caller can say why it waits).

    Returns:
        True when ``out`` was already built (by an earlier or a concurrent process), False when this
        call built it.

    Raises:
        Whatever ``build`` raises; ``out`` is then left unbuilt and the next call builds again.
    """
    if (out / marker).exists():
        return True
    out.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(out) + ".lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        if on_wait is not None:
            on_wait()
        lock.acquire()
    try:
        if (out / marker).exists():
            return True
        tmp = out.with_name(out.name + ".tmp")
        if tmp.exists():
            shutil.rmtree(tmp)
        if out.exists():  # a half-copied entry without its marker
            shutil.rmtree(out)
        build(tmp)
        tmp.rename(out)
        return False
    finally:
        lock.release()
