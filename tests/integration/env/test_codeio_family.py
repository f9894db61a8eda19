"""Family ``codeio`` against the real sandbox: tests are built by running the dataset's generator and
reference in the sandbox, cached and stable; the reference passes, wrong programs score their share;
held-out problems are disjoint by problem id; a rewritten problem is checked against its reference;
the dataset's code, like the model's, runs nowhere but in the sandbox; and the env service serves the
family over gRPC."""

from __future__ import annotations

import ast
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from rlanything.v1 import env_pb2, env_pb2_grpc

from services.common.config import FamilyConfig, SandboxConfig
from services.common.sandbox import Sandbox, SandboxError
from services.env.code_variants import check_code_variant, solved_heldout
from services.env.disjoint import disjoint_specs, eval_keys, eval_specs
from services.env.families.base import TaskSpec
from services.env.families.code_problems import TASK_TEXT, CodeProblem, written_key
from services.env.families.codeio_family import CodeIOFamily
from services.env.families.codeio_problems import TESTS, CodeIOEntry, load_entries
from services.env.families.registry import build_family
from services.env.text_variants import VariantError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root (namespaces, per-run uids)")
SANDBOX = SandboxConfig(workers=2, timeout_s=2.0)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("codeio")


@pytest.fixture(scope="module")
def family(cache: Path) -> Iterator[CodeIOFamily]:
    fam = build_family(FamilyConfig(type="codeio", knobs={"examples": 1}), cache, SANDBOX)
    assert isinstance(fam, CodeIOFamily)
    fam.start()
    yield fam
    fam.close()


def spec(seed: int, examples: int = 1) -> TaskSpec:
    return TaskSpec("codeio", {"examples": float(examples)}, seed)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_reference_passes_its_tests_built_in_the_sandbox(family, seed):
    problem = family.problem(spec(seed))
    assert len(problem.tests) == TESTS and problem.key in {e.problem_id for e in load_entries()}
    for stdin, expected in problem.tests:  # one JSON object in, one JSON value out
        assert isinstance(json.loads(stdin), dict)
        json.loads(expected)
    episode = family.make_episode(spec(seed), 0)
    (reference,) = episode.oracle_plan()
    result = episode.step(f"```python\n{reference}```")
    assert (result.reward, result.won, result.observation) == (1.0, True, f"Passed {TESTS} of {TESTS} tests.")
    assert family.oracle_plan_length(spec(seed)) == 1
    assert family.metadata()["library"] == "reasoning-gym"


def test_the_examples_knob_shows_tests_apart_from_the_hidden_ones(family):
    none, three = family.problem(spec(5, 0)), family.problem(spec(5, 3))
    assert none.tests == three.tests and none.key == three.key  # same problem, same hidden tests
    assert "Examples:" not in none.statement and three.statement.count("\ninput ") == 3
    shown = [line.split(" -> ")[0].removeprefix("input ") for line in three.statement.splitlines()
             if line.startswith("input ")]
    assert not {s.strip() for s in shown} & {stdin.strip() for stdin, _ in three.tests}


def test_a_wrong_program_scores_the_share_of_tests_it_passes(family):
    problem = family.problem(spec(1))
    first_in, first_out = problem.tests[0]
    program = (f"import sys\nline = sys.stdin.read().strip()\n"
               f"print({first_out.strip()!r} if line == {first_in.strip()!r} else 'null')\n")
    right = sum(1 for stdin, out in problem.tests if stdin == first_in or out.strip() == "null")
    episode = family.make_episode(spec(1), 0)
    result = episode.step(program)
    assert result.reward == right / TESTS and episode.passed[0] is True
    looping = family.make_episode(spec(1), 0).step("while True:\n    pass\n")
    assert looping.reward == 0.0 and "TLE" in looping.observation


def test_tests_are_cached_and_stable(family, cache: Path):
    problem = family.problem(spec(2))
    assert family.cache_dir == cache / "codeio"  # under env.cache_dir
    stored = [json.loads(p.read_text()) for p in family.cache_dir.glob("*.json")]
    mine = [s for s in stored if s.get("problem_id") == problem.key]
    assert len(mine) == 1 and [o + "\n" for o in mine[0]["outputs"][-TESTS:]] == [o for _, o in problem.tests]
    again = CodeIOFamily(SANDBOX, family.cache_dir)  # a new process reads the cache: no sandbox needed
    assert again.problem(spec(2)) == problem and again._sandbox is None


@pytest.mark.parametrize(("code", "generator", "reason"), [
    ("def main_solution(n):\n    return n", "def generate_inputs(rng):\n    import random\n    return {'n': random.random()}",
     "its input generator drew other inputs the second time"),
    ("def main_solution(n):\n    return 1 / 0", "def generate_inputs(rng):\n    return {'n': rng.randint(1, 9)}",
     "its reference ended RE (exit status 1) on input 0"),
    ("def main_solution(n):\n    import random\n    return random.random()",
     "def generate_inputs(rng):\n    return {'n': rng.randint(1, 9)}",
     "its reference printed other outputs the second time"),
    ("def main_solution(n):\n    while True:\n        pass", "def generate_inputs(rng):\n    return {'n': 1}",
     "its reference ended TLE (wall-clock limit of 2 s reached) on input 0"),
    ("def main_solution(n):\n    return 'x' * n", "def generate_inputs(rng):\n    return {'n': 5000}",
     "an output is empty, more than one line or longer than 1000 characters"),
])
def test_a_problem_whose_tests_cannot_be_built_is_not_used_and_why_is_cached(family, code, generator, reason):
    entry = CodeIOEntry("0" * 16, "Test problem.", "Input: n. Output: a value.", code, generator)
    assert family.build(entry) == reason
    assert reason in [json.loads(p.read_text()).get("unused") for p in family.cache_dir.glob("*.json")]


def test_held_out_problems_are_never_trained_on(family):
    cfg = FamilyConfig(type="codeio", knobs={"examples": 1}, train_slots=8, heldout_slots=4,
                       ood_knobs={"examples": 0}, ood_slots=2)
    excluded = eval_keys({"codeio": family}, eval_specs([cfg], base_seed=0))
    assert all(k.startswith("codeio:") and len(k) == len("codeio:") + 16 for k in excluded)
    train = disjoint_specs(family, {"examples": 1.0}, 8, base=0, excluded=excluded)
    assert not {family.instance_key(s) for s in train} & excluded
    # the examples knob does not make another instance: an OOD slot's problem is the held-out one's own
    assert family.instance_key(spec(7, 0)) == family.instance_key(spec(7, 3))


class _Rename(ast.NodeTransformer):
    """Renames every variable and function the program defines (not its arguments: called with the input's
    JSON keys, they are the problem's interface; not builtins or imports)."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def _new(self, name: str) -> str:
        return f"renamed_{name}" if name in self.names else name

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self._new(node.id)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.name = self._new(node.name)
        self.generic_visit(node)
        return node


def renamed(program: str) -> str:
    tree = ast.parse(program)
    defined = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    defined |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    return ast.unparse(_Rename(defined).visit(tree)) + "\n"


def test_rewrites_of_a_held_out_problem_are_refused_however_they_are_worded(family):
    """The four probes of a held-out problem — a copy with other spacing, its reference with every name
    changed, and two paraphrases (another statement, another program text, other test inputs) — are
    each found to be that problem by running their reference on its tests in the sandbox; a different
    problem is not."""
    cfg = FamilyConfig(type="codeio", knobs={"examples": 1}, train_slots=2, heldout_slots=3)
    specs = eval_specs([cfg], base_seed=0)
    heldout = [(family.instance_key(s), family.problem(s)) for s in specs]
    key, target = heldout[1]
    tests = target.tests[:3]
    probes = {
        "copy, other spacing": CodeProblem("  " + target.statement.replace(" ", "  "), target.reference, tests, "w"),
        "every name changed": CodeProblem(target.statement, renamed(target.reference), tests, "w"),
        "paraphrase": CodeProblem("Read one JSON object and answer as the function below does.",
                                  "exec(compile(" + repr(target.reference) + ", 'solution', 'exec'))\n", tests, "w"),
        "paraphrase, other program": CodeProblem("Another wording of the task.", renamed(
            "import sys\n" + target.reference), target.tests[3:] or tests, "w"),
    }
    assert "renamed_" in probes["every name changed"].reference
    found = {name: solved_heldout(p, heldout, family.run_tests) for name, p in probes.items()}
    assert found == dict.fromkeys(probes, key), found
    assert all(written_key(p) != key for p in probes.values())  # no key says so: running them does
    other = CodeProblem("Print the sum of the list xs.", "import json\nd = json.loads(input())\nprint(sum(d['xs']))\n",
                        (('{"xs": [1]}\n', "1\n"),), "written")
    assert solved_heldout(other, heldout, family.run_tests) is None


def test_a_rewritten_problem_is_checked_against_its_reference_in_the_sandbox(family, monkeypatch):
    """The code family's acceptance path (`check_code_variant`) on a CodeI/O parent: the rewrite's own
    reference must pass its own tests in the sandbox; then it is playable like any written problem."""
    parent = family.problem(spec(0))
    reference = "import json\nd = json.loads(input())\nprint(json.dumps(sum(d['xs'])))\n"
    tests = tuple((json.dumps({"xs": xs}) + "\n", f"{sum(xs)}\n") for xs in ([1, 2], [5], [-3, 3, 4]))
    variant = CodeProblem("Print the sum of the list xs.", reference, tests, "written")
    check_code_variant(parent, variant, family.run_tests)
    seed = family.add_written(variant)
    assert family.instance_key(spec(seed)) == f"codeio:{written_key(variant)}"
    assert family.make_episode(spec(seed), 0).step(reference).won
    wrong = CodeProblem(variant.statement, reference.replace("sum(d['xs'])", "max(d['xs'])"), tests, "written")
    with pytest.raises(VariantError, match="fails its own test 0"):
        check_code_variant(parent, wrong, family.run_tests)

    def refuse(self, jobs):
        raise SandboxError("runner disabled by the test")

    monkeypatch.setattr(Sandbox, "run_many", refuse)
    with pytest.raises(SandboxError, match="runner disabled"):
        check_code_variant(parent, variant, family.run_tests)


def test_the_dataset_s_code_runs_only_in_the_sandbox(tmp_path: Path, monkeypatch):
    """With the sandbox's runner made to fail, no test can be built (the generator and the reference
    run nowhere else) and nothing is cached; an answer to a built problem cannot be scored either."""
    fam = CodeIOFamily(SANDBOX, tmp_path)
    built = fam.problem(spec(3))

    def refuse(self, jobs):
        raise SandboxError("runner disabled by the test")

    monkeypatch.setattr(Sandbox, "run_many", refuse)
    monkeypatch.setattr(Sandbox, "run", lambda self, *a, **k: refuse(self, []))
    try:
        fresh = CodeIOFamily(SANDBOX, tmp_path / "empty")
        with pytest.raises(SandboxError, match="runner disabled"):
            fresh.problem(spec(3))
        assert not list((tmp_path / "empty").glob("*.json"))
        with pytest.raises(SandboxError, match="runner disabled"):
            fam.make_episode(spec(3), 0).step(built.reference)
    finally:
        fam.close()
        fresh.close()


def listed(env: env_pb2_grpc.EnvironmentStub, count: int, timeout_s: float = 60.0) -> list[env_pb2.TaskInfo]:
    """The codeio tasks once there are ``count`` (the pool is seeded after SERVING)."""
    deadline = time.monotonic() + timeout_s
    while len(tasks := list(env.ListTasks(env_pb2.ListTasksRequest(family="codeio")).tasks)) < count:
        assert time.monotonic() < deadline, f"{len(tasks)} of {count} codeio tasks listed after {timeout_s:g} s"
        time.sleep(0.2)
    return tasks


@pytest.mark.integration
@pytest.mark.slow
def test_the_env_service_serves_codeio_tasks_scored_in_its_sandbox(spawn_service, tmp_path) -> None:
    """The env service as a process: its seed tasks' tests are built in its sandbox at seeding; an answer
    sent through Reset/Step runs there; the held-out task is another problem than every train task."""
    family = {"type": "codeio", "knobs": {"examples": 1}, "train_slots": 3, "heldout_slots": 1, "ood_slots": 0}
    svc = spawn_service("env", json.dumps({"env": {"cache_dir": str(tmp_path / "cache"), "families": [family],
                                                   "scheduler": {"enabled": False},
                                                   "sandbox": {"workers": 2, "timeout_s": 2.0}}}))
    env = env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(svc.address))
    tasks = listed(env, 4)
    assert sorted(t.split for t in tasks) == ["heldout", "train", "train", "train"]
    assert all(t.metadata["library"] == "reasoning-gym" and t.oracle_plan_length == 1 for t in tasks)
    local = CodeIOFamily(cache_dir=tmp_path / "cache" / "codeio")  # reads the service's cache: runs nothing
    problems = {t.ref.slot_id: local.problem(TaskSpec("codeio", dict(t.knobs), t.seed)) for t in tasks}
    assert local._sandbox is None
    heldout = next(problems[t.ref.slot_id].key for t in tasks if t.split == "heldout")
    assert heldout not in {problems[t.ref.slot_id].key for t in tasks if t.split == "train"}
    for task in tasks:
        problem = problems[task.ref.slot_id]
        reset = env.Reset(env_pb2.ResetRequest(task=task.ref, seed=0))
        assert reset.single_turn and reset.task_text == f"{TASK_TEXT}\n{problem.statement}"
        check = reset.code_check   # for the critic's scoring of generated tests, not for the prompt
        assert (check.reference, check.checker) == (problem.reference, problem.checker) and check.input_validator
        assert problem.reference not in reset.task_text
        win = env.Step(env_pb2.StepRequest(session_id=reset.session_id, action=f"```python\n{problem.reference}```"))
        assert (win.won, win.reward, win.observation) == (True, 1.0, "Passed 8 of 8 tests.")
        reset = env.Reset(env_pb2.ResetRequest(task=task.ref, seed=1))
        lose = env.Step(env_pb2.StepRequest(session_id=reset.session_id, action="import sys\nsys.exit(3)\n"))
        assert not lose.won and lose.reward == 0.0 and "RE (exit status 3)" in lose.observation
        assert list(lose.test_verdicts) == ["RE"] * 8 and list(win.test_verdicts) == ["OK"] * 8
