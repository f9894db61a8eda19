"""reasoning-gym's CodeI/O problems as coding problems (pure, but for reading the package's data file).

reasoning-gym ships ``codeio.jsonl.gz`` (3,002 entries): each has a task description, an input/output
spec, a reference solution (a function ``main_solution(**inputs)``) and an input generator
(``generate_inputs(rng: Random) -> dict``). reasoning-gym's own dataset runs both with ``exec`` in the
calling process to make its questions; here nothing of the dataset runs outside the sandbox: this module
only builds the programs (`generator_program`, `reference_program`) and the problem from their outputs
(`problem_from_runs`); the family runs them (`services.env.families.codeio_family`).

A program for a CodeI/O problem reads one line of JSON from standard input (the inputs by name) and
prints one line: the return value as ``json.dumps`` writes it. Ground-truth tests are the reference's
output on inputs the generator draws from a fixed seed.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.util
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from services.common.errors import InvalidArgumentError
from services.common.sandbox.checkers import FLOAT_DEFAULT
from services.env.families.code_problems import CodeProblem

__all__ = ["CodeIOEntry", "load_entries", "stdlib_only", "generator_program", "reference_program",
           "problem_from_runs", "imported_modules", "data_file", "statement", "IO_TEXT", "TESTS", "MAX_EXAMPLES", "MAX_IO_CHARS", "GENERATOR_SEED"]

TESTS = 8
"""Hidden ground-truth tests per problem."""
MAX_EXAMPLES = 3
"""Most input/output examples a statement shows (knob ``examples``); they are drawn before the tests."""
MAX_IO_CHARS = 1000
"""A problem whose generated input or reference output is longer than this (characters of JSON) is not used."""
GENERATOR_SEED = 0
"""The seed of ``random.Random`` the input generator draws every problem's inputs from (the tests stay fixed)."""
IO_TEXT = ("Your program reads one line from standard input: a JSON object holding the input variables by name. "
           "It prints one line: the return value as JSON, as Python's json.dumps writes it.")


@dataclass(frozen=True)
class CodeIOEntry:
    """One CodeI/O problem as the data file holds it; ``problem_id`` names its content."""

    problem_id: str
    """The first 16 hex digits of the SHA-256 of the task description: two entries describing the same
    task are one instance (held-out and training problems are kept apart by it)."""
    description: str
    io_spec: str
    code: str
    """The reference solution: defines ``main_solution``."""
    generator: str
    """Defines ``generate_inputs(rng: Random) -> dict``."""


_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import\b|import[ \t]+([\w., \t]+))", re.M)


def imported_modules(source: str) -> set[str]:
    """Top-level names of the modules ``source`` imports (from its ``import`` and ``from ... import``
    lines; relative imports count as ``""``, which is no standard-library module)."""
    names: set[str] = set()
    for relative, plain in _IMPORT.findall(source):
        if relative or not plain:
            names.add("" if relative.startswith(".") else relative.split(".")[0])
        else:
            names |= {part.split()[0].split(".")[0] for part in plain.split(",") if part.strip()}
    return names


def stdlib_only(source: str) -> bool:
    """Does ``source`` import nothing but the standard library (all the sandbox offers)?"""
    return imported_modules(source) <= set(sys.stdlib_module_names)


def data_file() -> Path:
    """The CodeI/O data file of the installed reasoning-gym (found without importing the package, whose
    import loads every dataset).

    Raises:
        InvalidArgumentError: reasoning-gym is not installed, or has no ``data/codeio.jsonl.gz``.
    """
    spec = importlib.util.find_spec("reasoning_gym")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        path = Path(location) / "data" / "codeio.jsonl.gz"
        if path.is_file():
            return path
    raise InvalidArgumentError(f"codeio: reasoning-gym's data/codeio.jsonl.gz not found (package at {locations})")


@functools.lru_cache(maxsize=1)
def load_entries() -> tuple[CodeIOEntry, ...]:
    """The data file's entries whose reference and generator use the standard library only (2,213 of
    3,002 in reasoning-gym 0.1.25; numpy, sympy and the like are not importable in the sandbox), in file
    order, one per task description (the first)."""
    entries: dict[str, CodeIOEntry] = {}
    with gzip.open(data_file(), "rt", encoding="utf-8") as f:
        for line in f:
            raw = json.loads(line)
            code, generator = str(raw["code_sample"]), str(raw["input_generator"])
            if not (stdlib_only(code) and stdlib_only(generator)):
                continue
            description = str(raw["task_description"]).strip()
            problem_id = hashlib.sha256(description.encode()).hexdigest()[:16]
            entries.setdefault(problem_id, CodeIOEntry(problem_id, description, str(raw["input_output_spec"]).strip(),
                                                       code, generator))
    return tuple(entries.values())


def generator_program(entry: CodeIOEntry, count: int, seed: int = GENERATOR_SEED) -> str:
    """A program printing ``count`` inputs of ``entry``, one JSON object a line, drawn by its generator
    from ``random.Random(seed)`` (run it in the sandbox: it is the dataset's code)."""
    return (f"from random import Random\n{entry.code}\n\n{entry.generator}\n\n"
            "import json as _json\n"
            f"_rng = Random({int(seed)})\n"
            f"for _ in range({int(count)}):\n"
            "    print(_json.dumps(generate_inputs(_rng)))\n")


def reference_program(entry: CodeIOEntry) -> str:
    """The reference solution as a program: reads the inputs as one JSON object, prints
    ``json.dumps(main_solution(**inputs))``."""
    return (f"{entry.code.rstrip()}\n\n"
            "import json as _json, sys as _sys\n"
            "print(_json.dumps(main_solution(**_json.loads(_sys.stdin.read()))))\n")


def statement(entry: CodeIOEntry, examples: list[tuple[str, str]], checker: str = "exact") -> str:
    """What the policy is shown: the description, the input/output spec, the I/O format, how numbers are
    compared when the checker is not exact (`checker_for`), the examples."""
    shown = "".join(f"\ninput {stdin.strip()} -> output {out.strip()}" for stdin, out in examples)
    tolerance = "" if checker == "exact" else f"\n{FLOAT_TEXT.format(rel=FLOAT_DEFAULT.rel)}"
    return (f"{entry.description}\n\n{entry.io_spec}\n\n{IO_TEXT}{tolerance}" + (f"\nExamples:{shown}" if shown else ""))


FLOAT_TEXT = "Floating-point numbers in the output are accepted within a relative error of {rel:g}."
"""The statement's line for a problem compared by the float checker."""


def checker_for(outputs: list[str]) -> str:
    """The checker a problem declares from its reference outputs: the float checker (`FLOAT_DEFAULT`:
    relative 1e-6, absolute 1e-9) when any output holds a floating-point number, else exact."""
    return str(FLOAT_DEFAULT) if any(_FLOAT.search(o) for o in outputs) else "exact"


_FLOAT = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+(?=[eE]))(?:[eE][-+]?\d+)?")


def problem_from_runs(entry: CodeIOEntry, inputs: list[str], outputs: list[str], examples: int) -> CodeProblem:
    """The problem of ``entry`` from its generated ``inputs`` (JSON lines) and the reference's
    ``outputs`` on them (`MAX_EXAMPLES` + `TESTS` of each, in order): the first ``examples`` pairs are
    shown in the statement, the last `TESTS` are the hidden ground-truth tests; key: the problem id.

    Raises:
        InvalidArgumentError: ``examples`` outside [0, `MAX_EXAMPLES`], or not `MAX_EXAMPLES` + `TESTS`
            inputs and outputs.
    """
    if not 0 <= examples <= MAX_EXAMPLES:
        raise InvalidArgumentError(f"codeio: knob examples={examples} outside [0, {MAX_EXAMPLES}]")
    if not len(inputs) == len(outputs) == MAX_EXAMPLES + TESTS:
        raise InvalidArgumentError(f"codeio: {len(inputs)} inputs and {len(outputs)} outputs, expected "
                                   f"{MAX_EXAMPLES + TESTS} of each")
    pairs = [(i.strip() + "\n", o.strip() + "\n") for i, o in zip(inputs, outputs, strict=True)]
    checker = checker_for(outputs)
    return CodeProblem(statement(entry, pairs[:examples], checker), reference_program(entry),
                       tuple(pairs[MAX_EXAMPLES:]), entry.problem_id, checker, json_validator(inputs))


_VALIDATOR_BODY = """
def kind(v):
    for name, t in (("bool", bool), ("int", int), ("float", float), ("str", str), ("list", list), ("dict", dict)):
        if isinstance(v, t):
            return name
    return "null"
try:
    got = json.loads(sys.stdin.read())
except ValueError:
    raise SystemExit(1)
if not isinstance(got, dict) or set(got) != set(SPEC):
    raise SystemExit(1)
for key, value in got.items():
    k = kind(value)
    if k not in SPEC[key] and not (k == "int" and "float" in SPEC[key]):
        raise SystemExit(1)
"""


def json_kind(value: object) -> str:
    """The JSON type name of ``value``: bool, int, float, str, list, dict or null."""
    for name, t in (("bool", bool), ("int", int), ("float", float), ("str", str), ("list", list), ("dict", dict)):
        if isinstance(value, t):
            return name
    return "null"


def json_validator(inputs: list[str]) -> str:
    """The input validator of a CodeI/O problem, from its generated inputs (JSON objects): a program that
    accepts one JSON object with the same keys, each value of a JSON type some input gave that key (an
    integer where a float was seen is accepted). "" when an input is not a JSON object."""
    spec: dict[str, set[str]] = {}
    for line in inputs:
        try:
            obj = json.loads(line)
        except ValueError:
            return ""
        if not isinstance(obj, dict):
            return ""
        for key, value in obj.items():
            spec.setdefault(key, set()).add(json_kind(value))
    keys = [set(json.loads(line)) for line in inputs]
    if any(k != keys[0] for k in keys):
        return ""
    return f"import json, sys\nSPEC = {({k: sorted(v) for k, v in sorted(spec.items())})!r}\n{_VALIDATOR_BODY}"
