"""Votes of the generative judge: strict parsing and aggregation (pure; arXiv 2602.02488, loop 2).

A vote S ∈ {+1, −1, 0} is read from the content of the LAST ``\\boxed{...}`` of the judge's
answer (the judge prompt shows the agent's own boxes defanged, `judge_prompt.defang`, so a box
in the judge's answer is its own verdict). The content, stripped of surrounding whitespace and
with the Unicode minus (U+2212, U+FE63, U+FF0D) and fullwidth plus (U+FF0B) read as ASCII signs,
is a vote when it is ±1 written as an integer or a decimal: ``1``, ``+1``, ``-1``, ``1.0``,
``−1.00``. Anything else is an invalid vote, value 0: no box, an unterminated last box, ``0``,
``2``, ``1/2``, ``0.5``, ``1.``, words, ``+ 1``. The consistency reward gives invalid votes the
format penalty, so being strict here is what teaches the judge the format.

Aggregation: S̄ = (1/m) Σ_l S_l with invalid votes counted as 0 (`mean_vote`, shared with the
critic); S̄ = 0 for m = 0.
"""

from __future__ import annotations

import re

from rlanything.v1.events_pb2 import STEP_LABEL_BAD, STEP_LABEL_GOOD

from services.common.algo.integrated_reward import mean_vote
from services.common.answers import last_boxed

__all__ = ["VALID_VERDICTS", "parse_vote", "mean_vote", "label_vote", "majority_vote"]

VALID_VERDICTS: dict[str, int] = {"1": 1, "+1": 1, "-1": -1}
"""The canonical box contents of a vote and their values (what the judge is taught to write)."""
_SIGNS = str.maketrans({"\u2212": "-", "\ufe63": "-", "\uff0d": "-", "\uff0b": "+"})
_UNIT = re.compile(r"([+-]?)1(?:\.0+)?")


def parse_vote(text: str) -> int:
    """The vote in ``text``: +1, −1, or 0 when the last ``\\boxed{}`` is missing or not ±1 (rule above)."""
    content = last_boxed(text)
    if content is None:
        return 0
    m = _UNIT.fullmatch(content.strip().translate(_SIGNS))
    return 0 if m is None else (-1 if m.group(1) == "-" else 1)


def label_vote(oracle_label: int) -> int:
    """The vote the environment's oracle casts: GOOD → +1, BAD → −1, UNSPECIFIED → 0 (invalid)."""
    votes: dict[int, int] = {STEP_LABEL_GOOD: 1, STEP_LABEL_BAD: -1}
    return votes.get(oracle_label, 0)


def majority_vote(values_M: list[int]) -> int:
    """sign(S̄): +1, −1, or 0 on a tie (a tie never counts as a correct verdict).

    Raises:
        ValueError: a value outside {+1, −1, 0} (from `mean_vote`).
    """
    s_bar = mean_vote(values_M)
    return (s_bar > 0) - (s_bar < 0)
