"""The unit-test writer's cold start against the real sandbox: its targets are the references'
outputs on inputs off the shown examples, and a few SFT steps give a saved model and accuracies."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from services.common.config import FamilyConfig, JudgeSFTConfig, TinyModelConfig
from services.common.unit_tests import parse_unit_test
from services.env.families.base import TaskSpec
from services.offline.writer_sft import TEST_INPUTS, run_writer_sft, shown_examples, shown_inputs, writer_examples

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root (namespaces, per-run uids)")


def test_each_target_is_the_reference_s_output_on_an_input_not_shown(code_family):
    specs = [TaskSpec("code", {"ops": 1.0, "examples": 2.0, "max_constant": 99.0}, seed) for seed in range(12)]
    demos = writer_examples(code_family, specs, random.Random(0))
    assert len(demos) == 12
    for spec, demo in zip(specs, demos):
        problem = code_family.problem(spec)
        stdin, stdout = parse_unit_test(demo.response)
        x = int(stdin)
        assert x in TEST_INPUTS and str(x) not in shown_inputs(problem.statement)
        assert int(stdout) == eval(problem.reference.splitlines()[1][6:-1], {"x": x})  # noqa: S307 - our reference
        assert problem.statement in demo.chat[-1]["content"] and "\\boxed{INPUT => OUTPUT}" in demo.chat[-1]["content"]


def test_a_copy_share_copies_shown_examples_and_the_rest_are_computed(code_family):
    specs = [TaskSpec("code", {"ops": 1.0, "examples": 2.0, "max_constant": 99.0}, seed) for seed in range(40)]
    demos = writer_examples(code_family, specs, random.Random(1), copy_share=0.5)
    copies = 0
    for spec, demo in zip(specs, demos):
        problem = code_family.problem(spec)
        stdin, stdout = parse_unit_test(demo.response)
        shown = shown_examples(problem.statement)
        assert len(shown) == 2 and all(int(y) == eval(problem.reference.splitlines()[1][6:-1], {"x": int(x)})  # noqa: S307
                                       for x, y in shown)
        copies += (stdin.strip(), stdout.strip()) in shown
        assert int(stdout) == eval(problem.reference.splitlines()[1][6:-1], {"x": int(stdin)})  # noqa: S307 - our reference
    assert 12 <= copies <= 28, copies  # 40 draws at 0.5
    every = writer_examples(code_family, specs[:10], random.Random(2), copy_share=1.0)
    assert all(tuple(x.strip() for x in parse_unit_test(d.response)) in shown_examples(code_family.problem(s).statement)
               for s, d in zip(specs, every))


def test_a_short_cold_start_saves_a_writer_and_measures_its_accuracy(code_family, tmp_path: Path):
    fam_cfg = FamilyConfig(type="code", knobs={"ops": 1, "examples": 2})
    result = run_writer_sft(code_family, fam_cfg, JudgeSFTConfig(episodes=20, steps=2, eval_episodes=4),
                            TinyModelConfig(hidden_size=32, layers=1, heads=2, vocab_size=300), tmp_path / "w",
                            votes=2, max_new_tokens=8)
    assert (tmp_path / "w" / "config.json").exists() and result.examples == 20 and result.eval_tests == 8
    assert 0.0 <= result.accuracy_before <= 1.0 and 0.0 <= result.accuracy_after <= 1.0
