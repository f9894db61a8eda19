"""The test tiers hold: every folder of tests has a tier, a tier marker never disagrees with its
folder, and the tiers of `make test` (unit, integration) never launch the whole system."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import TIER_OF_FOLDER, TIERS

TESTS = Path(__file__).resolve().parents[1]

WHOLE_SYSTEM = re.compile(r'RLANYTHING,\s*"run"|Popen\(\s*\[\s*RLANYTHING,\s*"up"')
"""`rlanything run`, or `rlanything up` left running: the system tier's work."""


def test_every_folder_with_tests_has_a_tier() -> None:
    folders = {p.relative_to(TESTS).parts[0] for p in TESTS.rglob("test_*.py")}
    assert folders == set(TIER_OF_FOLDER)
    assert set(TIER_OF_FOLDER.values()) - {None} == set(TIERS)


def _marked_tiers(text: str) -> set[str]:
    return set(re.findall(r"pytest\.mark\.(" + "|".join(TIERS) + r")\b", text))


@pytest.mark.parametrize("path", sorted(TESTS.rglob("test_*.py")), ids=lambda p: str(p.relative_to(TESTS)))
def test_a_tier_marker_agrees_with_its_folder(path: Path) -> None:
    tier = TIER_OF_FOLDER[path.relative_to(TESTS).parts[0]]
    assert _marked_tiers(path.read_text()) <= {tier}, f"{path}: marked {_marked_tiers(path.read_text())}, folder {tier}"


def test_make_test_tiers_never_launch_the_whole_system() -> None:
    fast = [p for p in TESTS.rglob("*.py") if p != Path(__file__).resolve()
            and TIER_OF_FOLDER.get(p.relative_to(TESTS).parts[0]) in ("unit", "integration")]
    offenders = [str(p.relative_to(TESTS)) for p in fast if WHOLE_SYSTEM.search(p.read_text())]
    assert offenders == [], f"move these to tests/system/ (make test must stay a few minutes): {offenders}"
    assert WHOLE_SYSTEM.search('subprocess.run([RLANYTHING, "run", str(cfg)])')  # the pattern finds both forms
    assert WHOLE_SYSTEM.search('subprocess.Popen([RLANYTHING, "up", "--run-dir", d])')
    assert not WHOLE_SYSTEM.search('subprocess.run([RLANYTHING, "up", str(bad)])')  # a config that fails at once
