"""Votes of the generative judge: strict parsing and aggregation (pure; arXiv 2602.02488, loop 2).

A vote S ∈ {+1, −1, 0} is read from the content of the LAST ``\\boxed{...}`` of the judge's
answer: exactly ``1``, ``+1`` or ``-1`` (surrounding whitespace allowed). Anything else is an
invalid vote, value 0: no box, an unterminated last box, ``0``, ``2``, ``1/2``, ``0.5``, words,
``+ 1``, a unicode minus. The consistency reward gives invalid votes the format penalty, so being
strict here is what teaches the judge the format.

Aggregation: S̄ = (1/m) Σ_l S_l with invalid votes counted as 0 (`mean_vote`, shared with the
critic); S̄ = 0 for m = 0.
"""

from __future__ import annotations

from rlanything.v1.events_pb2 import STEP_LABEL_BAD, STEP_LABEL_GOOD

from services.common.algo.integrated_reward import mean_vote
from services.common.answers import last_boxed

__all__ = ["VALID_VERDICTS", "parse_vote", "mean_vote", "label_vote", "majority_vote"]

VALID_VERDICTS: dict[str, int] = {"1": 1, "+1": 1, "-1": -1}
"""Box contents that count as a vote (after stripping whitespace), and their values."""


def parse_vote(text: str) -> int:
    """The vote in ``text``: +1, −1, or 0 when the last ``\\boxed{}`` is missing or not ±1."""
    content = last_boxed(text)
    return 0 if content is None else VALID_VERDICTS.get(content.strip(), 0)


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
