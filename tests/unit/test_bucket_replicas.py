"""Every KV bucket a service opens is created with ``nats.stream_replicas`` replicas.

The streams get it in one place (`EventBus.ensure_streams`); buckets are opened in many, each
through `open_bucket` or a class's ``open`` over it, whose ``replicas`` defaults to 1. A call that
forgets it leaves that bucket on one node of a cluster: lost with that node. (The heavy chaos test
checks the same on a running three-node cluster, stream by stream.)
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OPENERS = {"ProtoBucket", "GroupStore", "StatsStore", "JudgedMarks"}


def _bucket_opens(tree: ast.AST) -> list[ast.Call]:
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open_bucket":
            calls.append(node)
        elif (isinstance(func, ast.Attribute) and func.attr == "open" and isinstance(func.value, ast.Name)
              and func.value.id in OPENERS):
            calls.append(node)
    return calls


def test_every_bucket_opened_by_a_service_passes_replicas() -> None:
    found, missing = 0, []
    for path in sorted((ROOT / "services").rglob("*.py")):
        for call in _bucket_opens(ast.parse(path.read_text(), str(path))):
            found += 1
            if not any(k.arg == "replicas" for k in call.keywords):
                missing.append(f"{path.relative_to(ROOT)}:{call.lineno}")
    assert found >= 15, f"only {found} bucket opens found: did the helpers get renamed?"
    assert not missing, f"bucket opened without replicas= (nats.stream_replicas): {missing}"
