from rlanything.v1 import events_pb2 as _events_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RoundReportRequest(_message.Message):
    __slots__ = ("round",)
    ROUND_FIELD_NUMBER: _ClassVar[int]
    round: int
    def __init__(self, round: _Optional[int] = ...) -> None: ...

class RoundReport(_message.Message):
    __slots__ = ("metrics", "groups_complete", "groups_partial", "groups_open")
    METRICS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    GROUPS_PARTIAL_FIELD_NUMBER: _ClassVar[int]
    GROUPS_OPEN_FIELD_NUMBER: _ClassVar[int]
    metrics: _events_pb2.RoundMetrics
    groups_complete: int
    groups_partial: int
    groups_open: int
    def __init__(self, metrics: _Optional[_Union[_events_pb2.RoundMetrics, _Mapping]] = ..., groups_complete: _Optional[int] = ..., groups_partial: _Optional[int] = ..., groups_open: _Optional[int] = ...) -> None: ...

class TaskStatsRequest(_message.Message):
    __slots__ = ("slot_id",)
    SLOT_ID_FIELD_NUMBER: _ClassVar[int]
    slot_id: str
    def __init__(self, slot_id: _Optional[str] = ...) -> None: ...

class TaskStats(_message.Message):
    __slots__ = ("task", "rollouts", "wins", "acc", "last_round")
    TASK_FIELD_NUMBER: _ClassVar[int]
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    WINS_FIELD_NUMBER: _ClassVar[int]
    ACC_FIELD_NUMBER: _ClassVar[int]
    LAST_ROUND_FIELD_NUMBER: _ClassVar[int]
    task: _events_pb2.TaskRef
    rollouts: int
    wins: int
    acc: float
    last_round: int
    def __init__(self, task: _Optional[_Union[_events_pb2.TaskRef, _Mapping]] = ..., rollouts: _Optional[int] = ..., wins: _Optional[int] = ..., acc: _Optional[float] = ..., last_round: _Optional[int] = ...) -> None: ...

class TaskStatsResponse(_message.Message):
    __slots__ = ("stats",)
    STATS_FIELD_NUMBER: _ClassVar[int]
    stats: _containers.RepeatedCompositeFieldContainer[TaskStats]
    def __init__(self, stats: _Optional[_Iterable[_Union[TaskStats, _Mapping]]] = ...) -> None: ...
