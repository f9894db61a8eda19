"""Reading the final ``\\boxed{...}`` answer out of model text (pure; shared by policy and judge).

Both the agent (``\\boxed{i}``, an action number) and the judge (``\\boxed{1}`` / ``\\boxed{-1}``,
a verdict) end their answers with a box; only the last box counts.
"""

from __future__ import annotations

__all__ = ["last_boxed"]


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` in ``text`` (nested braces allowed); None if absent
    or unterminated."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i = start + len("\\boxed{")
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j].strip()
    return None
