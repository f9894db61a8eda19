"""Small text rules shared by services (pure)."""

from __future__ import annotations

__all__ = ["fence"]


def fence(text: str) -> str:
    """User or tool text between fence lines (``<<<`` … ``>>>``), with fence markers inside it
    removed, so a model reading it can tell a product's users' words from its instructions."""
    return "<<<\n" + text.replace("<<<", "").replace(">>>", "") + "\n>>>"
