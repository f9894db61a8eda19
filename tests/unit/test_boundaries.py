"""The services are peers: the protobuf contracts are their only coupling.

Inside ``services/<svc>/`` (policy, reward, env, critic) a module may import the standard
library, third-party packages, the generated ``rlanything.v1`` stubs, ``services.common`` and its
own service package — never another service, the composition packages or the CLI.
``services.common`` imports nothing of the services. The one-machine composition package
``services.offline`` is used only by ``services/run/``, ``services/cli.py``, scripts and tests.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("policy", "reward", "env", "critic", "ingest")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in ``path``, also inside functions."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def violations(package: str, allowed: tuple[str, ...]) -> list[str]:
    """``file:line module`` for each ``services.*`` import under ``services/<package>`` outside ``allowed``."""
    bad = []
    for path in sorted((ROOT / "services" / package).rglob("*.py")):
        for line, module in imported_modules(path):
            if module == "services" or module.startswith("services."):
                if not any(module == a or module.startswith(a + ".") for a in allowed):
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return bad


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_imports_only_common_and_itself(service: str) -> None:
    assert violations(service, ("services.common", f"services.{service}")) == []


def test_common_imports_no_service() -> None:
    assert violations("common", ("services.common",)) == []


def test_offline_is_used_only_by_composition_code() -> None:
    users = []
    for path in sorted((ROOT / "services").rglob("*.py")):
        rel = path.relative_to(ROOT / "services")
        if rel.parts[0] in ("offline", "run") or rel.name == "cli.py":
            continue
        users += [f"{rel}:{line}" for line, module in imported_modules(path)
                  if module == "services.offline" or module.startswith("services.offline.")]
    assert users == []


def test_the_check_catches_a_cross_service_import(tmp_path: Path) -> None:
    module = tmp_path / "votes.py"
    module.write_text("from services.policy.prompting import step_chat\n\ndef f():\n    import services.env.pool\n")
    assert imported_modules(module) == [(1, "services.policy.prompting"), (4, "services.env.pool")]
