"""Tasks record the library version that built them (field bugs, 8)."""

from __future__ import annotations

import importlib.metadata

from rlanything.v1.env_pb2 import TaskSlot, TaskVersion
from services.env.families.frozenlake import FrozenLakeFamily
from services.env.families.reasoning_gym_family import ReasoningGymFamily
from services.env.pool import library_drift


def test_each_family_names_its_library_and_installed_version() -> None:
    assert ReasoningGymFamily.library == "reasoning-gym"
    assert FrozenLakeFamily().metadata() == {"library": "gymnasium",
                                             "library_version": importlib.metadata.version("gymnasium")}


def slot(slot_id: str, family: str, version: str | None) -> TaskSlot:
    meta = {} if version is None else {"library": "gymnasium", "library_version": version}
    return TaskSlot(slot_id=slot_id, family=family, active=TaskVersion(metadata=meta))


def test_tasks_built_by_another_library_version_are_reported_once_per_family() -> None:
    installed = importlib.metadata.version("gymnasium")
    families = {"gym_text": FrozenLakeFamily()}
    assert library_drift([slot("a", "gym_text", installed), slot("b", "gym_text", None)], families) == []
    (warning,) = library_drift([slot("a", "gym_text", "0.29.1"), slot("b", "gym_text", "0.29.1"),
                                slot("c", "gym_text", installed)], families)
    assert warning.startswith("gym_text: 2 task(s) were built with gymnasium 0.29.1, this process has " + installed)
