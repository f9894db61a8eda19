"""The C allocator's policy for large blocks, set so that freed tensors return their memory at once.

glibc's ``malloc`` serves a block over its mmap threshold (128 KiB at start) with a mapping of its own
and unmaps it on ``free``. But it raises the threshold (up to 32 MiB on 64-bit) each time such a block
is freed, so that later blocks of that size come from the heap, where their memory stays in the
process after ``free`` unless it happens to lie at the heap's top. A trainer frees large tensors all
the time (a reloaded reference, micro-batch activations): under the dynamic threshold its resident
memory keeps the high-water mark of them. ``mallopt(M_MMAP_THRESHOLD, n)`` fixes the threshold (and
disables the raising), as the ``MALLOC_MMAP_THRESHOLD_`` environment variable does at start-up
(glibc manual, "Memory Allocation Tunables"; ``mallopt(3)``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3
"""``mallopt``'s parameter number for the mmap threshold (glibc ``malloc.h``)."""


def fix_mmap_threshold(threshold_bytes: int) -> bool:
    """Fix glibc's mmap threshold of this process at ``threshold_bytes`` (bytes; 0 leaves it dynamic).

    Returns True when set, False when the threshold was left alone (0 asked, or the C library is
    not glibc: musl, macOS; nothing to do there). Raises ValueError for a negative value or one
    above glibc's maximum (32 MiB on 64-bit, ``HEAP_MAX_SIZE / 2``), which ``mallopt`` would refuse.
    """
    if threshold_bytes < 0 or threshold_bytes > 32 * 1024 * 1024:
        raise ValueError(f"malloc_mmap_threshold must be in [0, 33554432] bytes, got {threshold_bytes}")
    if threshold_bytes == 0:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        log.info("no glibc mallopt here; the allocator's mmap threshold is left as it is")
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, threshold_bytes))

