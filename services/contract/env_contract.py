"""The Environment contract (proto/rlanything/v1/env.proto), as clauses run against any server.

`check_environment(ADDRESS)` runs every clause against a live server and returns one `Result`
each: passed, or failed with what was sent, what came back and what the contract requires, in
plain words. ``rlanything contract env ADDRESS`` prints them. The clauses are what the rollout
workers and the scheduler rely on:

1. ListTasks lists at least one task, each with a slot id, a family, a status (active/pending)
   and a split (train/heldout/ood); a split filter returns only that split; ``limit`` caps the
   list; a negative limit is INVALID_ARGUMENT.
2. Reset of a listed task returns a session id, an observation, ``max_steps`` > 0 and either
   admissible actions or ``single_turn``; the same task and seed give the same first observation.
3. Step on that session answers; playing the first admissible action each step ends the episode
   (terminated or truncated) within ``max_steps`` steps; ``won`` only with ``terminated``; a Step
   after the end is refused with INVALID_ARGUMENT or FAILED_PRECONDITION.
4. Close frees the session: a Step on it afterwards is NOT_FOUND.
5. Unknown ids are NOT_FOUND (Step and Close of an unknown session, Reset of an unknown slot);
   missing ids are INVALID_ARGUMENT (Step without a session id, Reset without a slot id).
"""

from __future__ import annotations

from collections.abc import Callable

import grpc
from rlanything.v1 import env_pb2, env_pb2_grpc
from rlanything.v1.events_pb2 import TaskRef

from services.contract.clauses import ClauseFailed, Result, call, refused, run_clauses, show

__all__ = ["check_environment", "CLAUSES", "Result"]

SPLITS = {"train", "heldout", "ood"}


class _Run:
    """State shared by the clauses of one check (the tasks listed, a first episode)."""

    def __init__(self, stub: env_pb2_grpc.EnvironmentStub, timeout_s: float) -> None:
        self.stub = stub
        self.timeout_s = timeout_s
        self.tasks: list[env_pb2.TaskInfo] = []

    def task(self) -> TaskRef:
        if not self.tasks:
            raise ClauseFailed("ListTasksRequest {}", "no task", "a listed task to play (clause 1 failed)")
        active = [t for t in self.tasks if t.status == "active"] or self.tasks
        return active[0].ref

    def reset(self, seed: int = 7) -> tuple[env_pb2.ResetRequest, env_pb2.ResetResponse]:
        request = env_pb2.ResetRequest(task=self.task(), seed=seed)
        return request, call(self.stub.Reset, request, self.timeout_s)


def _close_quietly(run: _Run, session_id: str) -> None:
    try:
        run.stub.Close(env_pb2.CloseRequest(session_id=session_id), timeout=run.timeout_s)
    except grpc.RpcError:
        pass  # Close is clause 4's business; here only the session is given back


def lists_tasks(run: _Run) -> None:
    request = env_pb2.ListTasksRequest()
    response = call(run.stub.ListTasks, request, run.timeout_s)
    run.tasks = list(response.tasks)
    if not run.tasks:
        raise ClauseFailed(show(request), show(response), "at least one task")
    for t in run.tasks:
        if not t.ref.slot_id or not t.ref.family or t.status not in ("active", "pending") or t.split not in SPLITS:
            raise ClauseFailed(show(request), f"a task {show(t)}",
                               "each task has ref.slot_id, ref.family, status active|pending and split train|heldout|ood")
    split = run.tasks[0].split
    filtered = call(run.stub.ListTasks, env_pb2.ListTasksRequest(split=split), run.timeout_s)
    if not filtered.tasks or any(t.split != split for t in filtered.tasks):
        raise ClauseFailed(show(env_pb2.ListTasksRequest(split=split)), show(filtered), f"only tasks of split {split!r}")
    limited = call(run.stub.ListTasks, env_pb2.ListTasksRequest(limit=1), run.timeout_s)
    if len(limited.tasks) != 1:
        raise ClauseFailed(show(env_pb2.ListTasksRequest(limit=1)), show(limited), "exactly one task with limit 1")
    refused(run.stub.ListTasks, env_pb2.ListTasksRequest(limit=-1), {grpc.StatusCode.INVALID_ARGUMENT},
             "INVALID_ARGUMENT for a negative limit", run.timeout_s)


def resets(run: _Run) -> None:
    request, response = run.reset()
    if not response.session_id or not response.observation or response.max_steps <= 0:
        raise ClauseFailed(show(request), show(response), "a session_id, an observation and max_steps > 0")
    if not response.single_turn and not response.admissible_actions:
        raise ClauseFailed(show(request), show(response), "admissible_actions, or single_turn for a direct answer")
    _, again = run.reset()
    if again.observation != response.observation:
        raise ClauseFailed(show(request) + " (twice)", f"{response.observation!r} then {again.observation!r}",
                           "the same first observation for the same task and seed")
    for r in (response, again):
        _close_quietly(run, r.session_id)  # Close is clause 4's business


def plays_to_the_end(run: _Run) -> None:
    _, reset = run.reset()
    actions, sent = list(reset.admissible_actions), None
    for _ in range(reset.max_steps + 1):
        sent = env_pb2.StepRequest(session_id=reset.session_id, action=actions[0] if actions else "42")
        step = call(run.stub.Step, sent, run.timeout_s)
        if step.won and not step.terminated:
            raise ClauseFailed(show(sent), show(step), "won only together with terminated")
        if step.terminated or step.truncated:
            break
        actions = list(step.admissible_actions)
    else:
        raise ClauseFailed(show(sent), f"still running after {reset.max_steps + 1} steps",
                           f"terminated or truncated within max_steps={reset.max_steps} steps")
    refused(run.stub.Step, sent, {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION},
             "a Step after the episode ended is refused (INVALID_ARGUMENT or FAILED_PRECONDITION)", run.timeout_s)
    _close_quietly(run, reset.session_id)


def close_frees_the_session(run: _Run) -> None:
    _, reset = run.reset()
    call(run.stub.Close, env_pb2.CloseRequest(session_id=reset.session_id), run.timeout_s)
    action = reset.admissible_actions[0] if reset.admissible_actions else "42"
    refused(run.stub.Step, env_pb2.StepRequest(session_id=reset.session_id, action=action),
             {grpc.StatusCode.NOT_FOUND}, "NOT_FOUND for a Step on a closed session", run.timeout_s)


def refuses_unknown_and_missing_ids(run: _Run) -> None:
    nf, ia = {grpc.StatusCode.NOT_FOUND}, {grpc.StatusCode.INVALID_ARGUMENT}
    refused(run.stub.Step, env_pb2.StepRequest(session_id="no-such-session", action="x"), nf,
             "NOT_FOUND for an unknown session", run.timeout_s)
    refused(run.stub.Close, env_pb2.CloseRequest(session_id="no-such-session"), nf,
             "NOT_FOUND when closing an unknown session", run.timeout_s)
    family = run.task().family
    refused(run.stub.Reset, env_pb2.ResetRequest(task=TaskRef(slot_id="no-such-slot", family=family)), nf,
             "NOT_FOUND for a Reset of an unknown slot", run.timeout_s)
    refused(run.stub.Step, env_pb2.StepRequest(action="x"), ia, "INVALID_ARGUMENT for a Step without session_id",
             run.timeout_s)
    refused(run.stub.Reset, env_pb2.ResetRequest(), ia, "INVALID_ARGUMENT for a Reset without task.slot_id",
             run.timeout_s)


CLAUSES: list[tuple[str, Callable[[_Run], None]]] = [
    ("1. ListTasks lists well-formed tasks, filters by split, honours limit", lists_tasks),
    ("2. Reset starts a reproducible episode", resets),
    ("3. Step plays an episode to its end, then refuses", plays_to_the_end),
    ("4. Close frees the session", close_frees_the_session),
    ("5. Unknown ids are NOT_FOUND, missing ids INVALID_ARGUMENT", refuses_unknown_and_missing_ids),
]


def check_environment(address: str, timeout_s: float = 30.0) -> list[Result]:
    """Run every clause against the Environment server at ``address`` (host:port), in order."""
    with grpc.insecure_channel(address) as channel:
        return run_clauses(CLAUSES, _Run(env_pb2_grpc.EnvironmentStub(channel), timeout_s))
