"""The unit-test writer's format (pure), shared by the reward service (which asks for tests) and the
critic (which runs them): the chat that asks for one test of a problem, and parsing the answer.

The writer answers with the test in its last ``\\boxed{INPUT => OUTPUT}``: what the program reads on
standard input and the exact output a correct program prints, a line break written as the two
characters ``\\n``. Both get a final newline; outputs are later compared after the sandbox's
normalisation (`services.common.sandbox.outputs_match`).
"""

from __future__ import annotations

import re

from services.common.answers import last_boxed

__all__ = ["UNIT_TEST_SYSTEM", "unit_test_chat", "parse_unit_test", "SEPARATOR", "extract_program"]

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|$)", re.DOTALL | re.IGNORECASE)
SEPARATOR = "=>"
UNIT_TEST_SYSTEM = ("You write unit tests for programming problems. A test is an input for the program's standard "
                    "input and the exact output a correct program prints for it.")


def unit_test_chat(problem: str, problem_chars: int = 1200) -> list[dict[str, str]]:
    """The chat asking for one test of ``problem`` (its last ``problem_chars`` characters)."""
    return [{"role": "system", "content": UNIT_TEST_SYSTEM},
            {"role": "user", "content": f"{problem.strip()[-problem_chars:]}\n\nWrite one unit test for this "
                                        f"problem. Answer as \\boxed{{INPUT {SEPARATOR} OUTPUT}}, a line break "
                                        "written as \\n."}]


def _text(part: str) -> str:
    body = part.strip().replace("\\n", "\n")
    return body if body.endswith("\n") else body + "\n"


def parse_unit_test(text: str) -> tuple[str, str] | None:
    """(standard input, expected output) of the writer's answer, or None when it has no
    ``\\boxed{INPUT => OUTPUT}`` with a non-empty output."""
    content = last_boxed(text)
    if content is None or SEPARATOR not in content:
        return None
    stdin, expected = content.split(SEPARATOR, 1)
    if not expected.strip():
        return None
    return _text(stdin), _text(expected)


def extract_program(action: str) -> str:
    """The program in a policy's answer: the first fenced code block (```python ... ```, the closing
    fence may be missing when the answer was cut), else the whole answer (what family ``code`` runs,
    and what the critic runs the generated tests against)."""
    match = _FENCE.search(action)
    return match.group(1) if match else action
