"""An out-of-process Environment server as a task family, by address (``type: remote``).

The server implements ``proto/rlanything/v1/env.proto`` (check it with ``rlanything contract env
ADDRESS``; ``examples/env_server.py`` is a template). Our pool keeps its own slots and splits:
task seed ``s`` plays the server's ``s mod n``-th listed task (of its n active tasks, by slot id)
with reset seed ``s div n``, so train, held-out and out-of-distribution slots draw from the same
list. Steps keep the server's own oracle labels; the family has no knobs (no variants) and no
plan lengths.
"""

from __future__ import annotations

import grpc
from rlanything.v1 import env_pb2, env_pb2_grpc

from services.common.errors import InvalidArgumentError
from services.common.grpc_runtime import channel
from services.env.families.base import Episode, StepResult, TaskFamily, TaskSpec

__all__ = ["RemoteFamily"]


class RemoteEpisode(Episode):
    """One episode on the remote server (a session there)."""

    def __init__(self, stub: env_pb2_grpc.EnvironmentStub, task: env_pb2.TaskInfo, seed: int, timeout_s: float) -> None:
        self.stub, self.timeout_s = stub, timeout_s
        reset = stub.Reset(env_pb2.ResetRequest(task=task.ref, seed=seed), timeout=timeout_s)
        self.session_id = reset.session_id
        self.task_text, self.observation = reset.task_text, reset.observation
        self.admissible_actions = tuple(reset.admissible_actions)
        self.single_turn = reset.single_turn

    def step(self, action: str) -> StepResult:
        r = self.stub.Step(env_pb2.StepRequest(session_id=self.session_id, action=action), timeout=self.timeout_s)
        self.observation, self.admissible_actions = r.observation, tuple(r.admissible_actions)
        return StepResult(r.observation, self.admissible_actions, r.reward, r.terminated or r.truncated, r.won,
                          r.oracle_plan_length or None, oracle_label=int(r.oracle_label))

    def oracle_plan(self) -> list[str] | None:
        return None

    def close(self) -> None:
        try:
            self.stub.Close(env_pb2.CloseRequest(session_id=self.session_id), timeout=self.timeout_s)
        except grpc.RpcError:
            pass  # the server already forgot it: nothing left to free


class RemoteFamily(TaskFamily):
    """Tasks served by the Environment server at ``address``.

    Raises:
        InvalidArgumentError: no Environment server answers at ``address``, or it lists no task.
    """

    name = "remote"
    knobs = ()
    max_steps = 30

    def __init__(self, address: str, timeout_s: float = 30.0) -> None:
        self.address, self.timeout_s = address, timeout_s
        self.stub = env_pb2_grpc.EnvironmentStub(channel(address))
        try:
            listed = self.stub.ListTasks(env_pb2.ListTasksRequest(), timeout=timeout_s).tasks
        except grpc.RpcError as err:
            raise InvalidArgumentError(f"env family remote: the Environment server at {address} did not answer "
                                       f"ListTasks ({err.code().name}: {err.details()})") from None
        self.tasks = sorted((t for t in listed if t.status == "active"), key=lambda t: t.ref.slot_id)
        if not self.tasks:
            raise InvalidArgumentError(f"env family remote: the Environment server at {address} lists no active task")

    def make_episode(self, spec: TaskSpec, episode_seed: int) -> RemoteEpisode:
        self.validate(spec)
        n = len(self.tasks)
        return RemoteEpisode(self.stub, self.tasks[spec.seed % n], (spec.seed // n) * 1_000_003 + episode_seed,
                             self.timeout_s)

    def oracle_plan_length(self, spec: TaskSpec) -> int | None:
        """0: unknown (the server labels steps, it tells no plan), which accepts every task."""
        self.validate(spec)
        return 0
