"""The env's written coding problems (family ``code`` with ``proposer: model``) in the KV bucket
``code_problems``: one entry per problem, key = its task seed in hex, value = JSON (statement,
reference, tests). A rewrite the environment model wrote and the sandbox checked is stored once
(create if absent) and put in the family's in-process mirror; every env replica loads the bucket at
start and refreshes its mirror from it, so a restarted or another replica can serve the task."""

from __future__ import annotations

import asyncio
import json
import logging

from nats.js.errors import KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from services.common.bus import CONNECTION_ERRORS
from services.common.kv import live_entries
from services.env.families.code_family import CodeFamily, written_seed
from services.env.families.code_problems import CodeProblem

__all__ = ["CodeTasks", "problem_json", "problem_of_json"]

log = logging.getLogger("rlanything.env.code")


def problem_json(problem: CodeProblem) -> bytes:
    """A written problem as the bucket stores it (pure)."""
    return json.dumps({"statement": problem.statement, "reference": problem.reference,
                       "tests": [list(t) for t in problem.tests]}, sort_keys=True).encode()


def problem_of_json(value: bytes) -> CodeProblem:
    """The problem of a bucket entry (pure).

    Raises:
        ValueError: not the JSON `problem_json` writes.
    """
    data = json.loads(value)
    try:
        return CodeProblem(str(data["statement"]), str(data["reference"]),
                           tuple((str(i), str(o)) for i, o in data["tests"]), "written")
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"code_problems entry is not a stored problem: {exc!r}") from None


class CodeTasks:
    """Written coding problems: the bucket and the family's mirror."""

    def __init__(self, kv: KeyValue, family: CodeFamily, refresh_s: float = 2.0) -> None:
        self.kv = kv
        self.family = family
        self.refresh_s = refresh_s

    async def load(self) -> int:
        """Fill the family's mirror from the bucket; returns how many written problems it holds."""
        for entry in await live_entries(self.kv):
            self.family.add_written(problem_of_json(entry.value))
        return len(self.family.written)

    async def refresh_loop(self) -> None:
        """Reload the mirror every ``refresh_s`` seconds (problems another replica stored); a reload that
        fails because NATS is slow or away is retried at the next one."""
        while True:
            await asyncio.sleep(self.refresh_s)
            try:
                await self.load()
            except CONNECTION_ERRORS as exc:
                log.warning("written problems reload failed; retrying", extra={"error": f"{type(exc).__name__}: {exc}"})

    async def store(self, problem: CodeProblem) -> int:
        """Store a checked written problem once and make it playable here; returns its task seed."""
        seed = written_seed(problem)
        try:
            await self.kv.create(f"{seed:x}", problem_json(problem))
        except KeyWrongLastSequenceError:
            pass  # the same problem was written before
        return self.family.add_written(problem)
