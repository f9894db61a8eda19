"""A `gymnasium.Env` over the env service's gRPC API, so any Gymnasium user can drive a remote task.

Observations and actions are text (`gymnasium.spaces.Text` over printable ASCII); the task text,
the admissible actions and the oracle's step label come in ``info``.
"""

from __future__ import annotations

import string
from typing import Any

import grpc
import gymnasium as gym
from gymnasium import spaces
from rlanything.v1 import env_pb2, env_pb2_grpc
from rlanything.v1.events_pb2 import StepLabel, TaskRef

from services.common.config import MAX_MESSAGE_BYTES
from services.common.grpc_runtime import DEFAULT_DEADLINE_S, channel

__all__ = ["RemoteTaskEnv", "CHARSET"]

CHARSET = string.printable
"""Characters an observation may hold; others are replaced by '?'."""


def _clean(text: str, max_length: int) -> str:
    allowed = set(CHARSET)
    return "".join(ch if ch in allowed else "?" for ch in text)[:max_length]


class RemoteTaskEnv(gym.Env[str, str]):
    """One task of a remote env service as a Gymnasium environment.

    Args:
        address: ``host:port`` of the env service.
        task: the task version to play.
        max_length: observation/action length bound in characters.
        deadline_s: seconds each RPC may take.

    ``reset(seed=s)`` starts a new remote episode (deterministic for a given seed); ``step(a)``
    sends the text action; ``close()`` ends the session and the channel.
    """

    metadata = {"render_modes": []}

    def __init__(self, address: str, task: TaskRef, max_length: int = 4096,
                 deadline_s: float = DEFAULT_DEADLINE_S, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.task = task
        self.deadline_s = deadline_s
        self.max_length = max_length
        self.channel = channel(address, max_message_bytes)
        self.stub = env_pb2_grpc.EnvironmentStub(self.channel)
        self.observation_space = spaces.Text(max_length=max_length, min_length=0, charset=CHARSET)
        self.action_space = spaces.Text(max_length=64, min_length=1, charset=string.ascii_lowercase + " ")
        self.session_id: str | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._close_session()
        episode_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        response = self.stub.Reset(env_pb2.ResetRequest(task=self.task, seed=episode_seed), timeout=self.deadline_s)
        self.session_id = response.session_id
        info = {"task_text": response.task_text, "admissible_actions": list(response.admissible_actions),
                "single_turn": response.single_turn, "max_steps": response.max_steps}
        return _clean(response.observation, self.max_length), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.session_id is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        response = self.stub.Step(env_pb2.StepRequest(session_id=self.session_id, action=str(action)),
                                  timeout=self.deadline_s)
        info = {"won": response.won, "admissible_actions": list(response.admissible_actions),
                "oracle_label": StepLabel.Name(response.oracle_label),
                "oracle_plan_length": response.oracle_plan_length}
        return (_clean(response.observation, self.max_length), float(response.reward), response.terminated,
                response.truncated, info)

    def _close_session(self) -> None:
        if self.session_id is not None:
            try:
                self.stub.Close(env_pb2.CloseRequest(session_id=self.session_id), timeout=self.deadline_s)
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.NOT_FOUND:  # expired already: nothing to close
                    raise
            self.session_id = None

    def close(self) -> None:
        self._close_session()
        self.channel.close()
        super().close()
