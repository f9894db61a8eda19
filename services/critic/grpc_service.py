"""gRPC `Critic` servicer: round reports and task statistics, answered from the ledger."""

from __future__ import annotations

import grpc
from rlanything.v1 import critic_pb2, critic_pb2_grpc

from services.common.grpc_runtime import map_errors
from services.critic.ledger import Ledger

__all__ = ["CriticServicer", "SERVICE_NAME"]

SERVICE_NAME = critic_pb2.DESCRIPTOR.services_by_name["Critic"].full_name


class CriticServicer(critic_pb2_grpc.CriticServicer):
    """Read-only queries; the ledger is filled from KV at start-up, so answers survive restarts."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    @map_errors
    async def GetRoundReport(self, request: critic_pb2.RoundReportRequest, context: grpc.aio.ServicerContext
                             ) -> critic_pb2.RoundReport:
        return self.ledger.round_report(int(request.round))

    @map_errors
    async def GetTaskStats(self, request: critic_pb2.TaskStatsRequest, context: grpc.aio.ServicerContext
                           ) -> critic_pb2.TaskStatsResponse:
        return critic_pb2.TaskStatsResponse(stats=self.ledger.task_stats(request.slot_id))
