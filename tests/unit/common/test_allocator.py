"""The trainer's allocator setting: freed mid-sized blocks return their memory to the system."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from services.common.allocator import fix_mmap_threshold

CHILD = r"""
import json, os, sys
from services.common.allocator import fix_mmap_threshold
fixed = fix_mmap_threshold(int(sys.argv[1]))
page = os.sysconf("SC_PAGE_SIZE")
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * page
MIB = 1024 * 1024
big = bytearray(16 * MIB)      # mapped on its own; freeing it raises glibc's dynamic threshold to 16 MiB
del big
blocks = [bytearray(4 * MIB) for _ in range(10)]   # bytearray() writes zeros: the pages are resident
before = rss()
keep = blocks.pop()            # the last block stays, so the heap cannot be trimmed from its top
del blocks
print(json.dumps({"fixed": fixed, "returned": before - rss()}))
"""


def _returned(threshold: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(threshold)], capture_output=True, text=True,
                         check=True, timeout=60)
    return json.loads(out.stdout)


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_fixed_threshold_returns_freed_blocks_that_the_dynamic_one_keeps():
    dynamic, fixed = _returned(0), _returned(131072)
    assert dynamic["fixed"] is False and fixed["fixed"] is True
    mib = 1024 * 1024
    assert dynamic["returned"] < 8 * mib, dynamic      # 36 MiB freed into the heap, kept by the process
    assert fixed["returned"] >= 32 * mib, fixed        # each 4 MiB block was its own mapping, unmapped


@pytest.mark.parametrize("value", [-1, 32 * 1024 * 1024 + 1])
def test_out_of_range_threshold_is_refused_naming_the_value(value):
    with pytest.raises(ValueError, match=str(value)):
        fix_mmap_threshold(value)


def test_ppo_config_validates_the_threshold_at_load():
    from pydantic import ValidationError

    from services.common.config import PPOConfig

    assert PPOConfig().malloc_mmap_threshold == 0 and PPOConfig(malloc_mmap_threshold=131072).malloc_mmap_threshold
    with pytest.raises(ValidationError, match="malloc_mmap_threshold"):
        PPOConfig(malloc_mmap_threshold=-5)
