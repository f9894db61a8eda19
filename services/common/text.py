"""Small text rules shared by services (pure)."""

from __future__ import annotations

import re

__all__ = ["fence", "EXTERNAL_ID"]

EXTERNAL_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
"""What an id chosen by a product may look like (episode, turn, feedback ids): 1-128 characters
of ``[A-Za-z0-9._:-]`` — no spaces, and no '@', so an e-mail address is never an id."""


def fence(text: str) -> str:
    """User or tool text between fence lines (``<<<`` … ``>>>``), with fence markers inside it
    removed, so a model reading it can tell a product's users' words from its instructions."""
    return "<<<\n" + text.replace("<<<", "").replace(">>>", "") + "\n>>>"
