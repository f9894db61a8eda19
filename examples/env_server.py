"""Bring your own environment: a complete Environment server in one file, against env.proto only.

The task: reach a target number from a start number by steps of +1 or -1 ("count to 7 from 3").
Replace `Episode` with your product's task; keep the four RPCs as they are. Check it with
``rlanything contract env 127.0.0.1:50071`` (every clause must pass), then give its address to a run.

    python examples/env_server.py --port 50071
"""

from __future__ import annotations

import argparse
import random
import uuid
from concurrent import futures

import grpc
from rlanything.v1 import env_pb2, env_pb2_grpc
from rlanything.v1.events_pb2 import STEP_LABEL_BAD, STEP_LABEL_GOOD, TaskRef

TASKS = [TaskRef(slot_id=f"count/train-{i}", family="count") for i in range(4)] + [
    TaskRef(slot_id="count/heldout-0", family="count")]


class Episode:
    """One episode: the number starts at ``start`` and must reach ``target``."""

    def __init__(self, task: TaskRef, seed: int) -> None:
        rng = random.Random(f"{task.slot_id}/{seed}")
        self.value, self.target, self.steps = rng.randint(0, 9), rng.randint(0, 9), 0
        self.max_steps, self.done = 12, False

    def observation(self) -> str:
        return f"The number is {self.value}; the target is {self.target}."

    def step(self, action: str) -> env_pb2.StepResponse:
        good = (action == "+1") == (self.value < self.target) and self.value != self.target
        self.value += {"+1": 1, "-1": -1}.get(action, 0)
        self.steps += 1
        won = self.value == self.target
        self.done = won or self.steps >= self.max_steps
        return env_pb2.StepResponse(observation=self.observation(), admissible_actions=["+1", "-1"], won=won,
                                    reward=1.0 if won else 0.0, terminated=won, truncated=self.done and not won,
                                    oracle_label=STEP_LABEL_GOOD if good else STEP_LABEL_BAD)


class CountingEnv(env_pb2_grpc.EnvironmentServicer):
    def __init__(self) -> None:
        self.sessions: dict[str, Episode] = {}

    def ListTasks(self, request, context):
        if request.limit < 0:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"limit must be >= 0, got {request.limit}")
        tasks = [env_pb2.TaskInfo(ref=t, status="active", split=t.slot_id.split("/")[1].split("-")[0])
                 for t in TASKS]
        tasks = [t for t in tasks if not request.split or t.split == request.split]
        return env_pb2.ListTasksResponse(tasks=tasks[: request.limit or None])

    def Reset(self, request, context):
        if not request.task.slot_id:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "task.slot_id is required")
        if request.task.slot_id not in {t.slot_id for t in TASKS}:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown task {request.task.slot_id!r}")
        session_id, episode = uuid.uuid4().hex, Episode(request.task, request.seed)
        self.sessions[session_id] = episode
        return env_pb2.ResetResponse(session_id=session_id, task_text="Reach the target number.",
                                     observation=episode.observation(), admissible_actions=["+1", "-1"],
                                     max_steps=episode.max_steps)

    def Step(self, request, context):
        if not request.session_id:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "session_id is required")
        episode = self.sessions.get(request.session_id)
        if episode is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown session {request.session_id!r}")
        if episode.done:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "the episode has ended; call Reset")
        return episode.step(request.action)

    def Close(self, request, context):
        if self.sessions.pop(request.session_id, None) is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown session {request.session_id!r}")
        return env_pb2.CloseResponse()


def serve(port: int, servicer: env_pb2_grpc.EnvironmentServicer | None = None) -> grpc.Server:
    """Start the server on 127.0.0.1:``port`` (0 = a free port; read it from ``server.port``)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    env_pb2_grpc.add_EnvironmentServicer_to_server(servicer or CountingEnv(), server)
    server.port = server.add_insecure_port(f"127.0.0.1:{port}")  # type: ignore[attr-defined]
    server.start()
    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=50071)
    running = serve(parser.parse_args().port)
    print(f"Environment server on 127.0.0.1:{running.port}", flush=True)  # type: ignore[attr-defined]
    running.wait_for_termination()
