"""What every contract suite shares: a clause's result, its failure (what was sent, what came
back, what the contract requires), the calls that expect an answer or a refusal, and the runner."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import text_format
from google.protobuf.message import Message

__all__ = ["Result", "ClauseFailed", "show", "call", "refused", "run_clauses"]


@dataclass(frozen=True)
class Result:
    """One clause's outcome; ``sent``, ``got`` and ``required`` are set when it failed."""

    clause: str
    passed: bool
    sent: str = ""
    got: str = ""
    required: str = ""


class ClauseFailed(Exception):
    """A clause does not hold: what was sent, what came back, what the contract requires."""

    def __init__(self, sent: str, got: str, required: str) -> None:
        super().__init__(required)
        self.sent, self.got, self.required = sent, got, required


def show(message: Message | None) -> str:
    """A request or response on one line (text format, long strings cut)."""
    if message is None:
        return "(nothing)"
    text = text_format.MessageToString(message, as_one_line=True)
    return f"{type(message).__name__} {{{text[:300] + ('…' if len(text) > 300 else '')}}}"


def call(rpc: Callable, request: Message, timeout_s: float) -> Message:
    try:
        return rpc(request, timeout=timeout_s)
    except grpc.RpcError as err:
        raise ClauseFailed(show(request), f"{err.code().name}: {err.details()}", "an answer (status OK)") from None


def refused(rpc: Callable, request: Message, codes: set[grpc.StatusCode], required: str, timeout_s: float) -> None:
    try:
        got = rpc(request, timeout=timeout_s)
    except grpc.RpcError as err:
        if err.code() in codes:
            return
        raise ClauseFailed(show(request), f"{err.code().name}: {err.details()}", required) from None
    raise ClauseFailed(show(request), f"OK: {show(got)}", required)


def run_clauses(clauses: Sequence[tuple[str, Callable[[Any], None]]], state: Any) -> list[Result]:
    """Run each ``(name, clause)`` on ``state`` in order; a clause raising `ClauseFailed` fails."""
    results = []
    for name, clause in clauses:
        try:
            clause(state)
            results.append(Result(name, True))
        except ClauseFailed as failed:
            results.append(Result(name, False, failed.sent, failed.got, failed.required))
    return results
