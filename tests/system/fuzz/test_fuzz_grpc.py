"""Generated requests on every gRPC method of the services: each is answered, within its
deadline, with OK or a status that names the problem — never UNKNOWN, INTERNAL, UNAVAILABLE or
a deadline (a crash or a hung handler)."""

from __future__ import annotations

import grpc
import pytest
from hypothesis import HealthCheck, given, settings

from rlanything.v1 import critic_pb2, env_pb2, ingest_pb2, policy_pb2, reward_pb2
from tests.system.fuzz.tally import EXAMPLES, tally
from tests.system.fuzz.strategies import payloads

pytestmark = [pytest.mark.system, pytest.mark.slow]

MODULES = {"env": env_pb2, "policy": policy_pb2, "reward": reward_pb2, "critic": critic_pb2, "ingest": ingest_pb2}
ACCEPTED = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
            grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.OUT_OF_RANGE,
            grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED}
DEADLINE_S = 60.0
"""A request not answered within this is a hung handler."""


def _methods() -> list[tuple[str, str, object]]:
    out = []
    for name, module in MODULES.items():
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                out.append((name, f"/{service.full_name}/{method.name}", method))
    return out


METHODS = _methods()
ALL_INPUTS = [m.input_type for _, _, m in METHODS]


@pytest.mark.parametrize(("service", "path", "method"), METHODS, ids=[p for _, p, _ in METHODS])
def test_every_generated_request_gets_a_named_status(system, service: str, path: str, method) -> None:
    address = system["services"][service]["address"]
    others = [d for d in ALL_INPUTS if d is not method.input_type]
    with grpc.insecure_channel(address) as channel:
        if method.server_streaming:  # read the whole stream: a failure may come after some chunks
            stream = channel.unary_stream(path, request_serializer=None, response_deserializer=None)

            def call(data: bytes, timeout: float) -> None:
                for _ in stream(data, timeout=timeout):
                    pass
        else:
            call = channel.unary_unary(path, request_serializer=None, response_deserializer=None)

        @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(payloads(method.input_type, others))
        def one(data: bytes) -> None:
            try:
                call(data, timeout=DEADLINE_S)
                code = grpc.StatusCode.OK
            except grpc.RpcError as exc:
                code = exc.code()
                assert code in ACCEPTED, f"{path}: {code.name}: {exc.details()} for {data[:200]!r}"
                assert code == grpc.StatusCode.OK or exc.details(), f"{path}: {code.name} without a message"
            tally(path, code.name)

        one()
