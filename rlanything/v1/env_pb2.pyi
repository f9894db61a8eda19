from rlanything.v1 import events_pb2 as _events_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TaskInfo(_message.Message):
    __slots__ = ("ref", "knobs", "status", "oracle_plan_length", "split", "parent_version", "seed", "metadata")
    class KnobsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    REF_FIELD_NUMBER: _ClassVar[int]
    KNOBS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ORACLE_PLAN_LENGTH_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    PARENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ref: _events_pb2.TaskRef
    knobs: _containers.ScalarMap[str, float]
    status: str
    oracle_plan_length: int
    split: str
    parent_version: int
    seed: int
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, ref: _Optional[_Union[_events_pb2.TaskRef, _Mapping]] = ..., knobs: _Optional[_Mapping[str, float]] = ..., status: _Optional[str] = ..., oracle_plan_length: _Optional[int] = ..., split: _Optional[str] = ..., parent_version: _Optional[int] = ..., seed: _Optional[int] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ListTasksRequest(_message.Message):
    __slots__ = ("family", "split", "limit")
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    family: str
    split: str
    limit: int
    def __init__(self, family: _Optional[str] = ..., split: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListTasksResponse(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[TaskInfo]
    def __init__(self, tasks: _Optional[_Iterable[_Union[TaskInfo, _Mapping]]] = ...) -> None: ...

class ResetRequest(_message.Message):
    __slots__ = ("task", "seed")
    TASK_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    task: _events_pb2.TaskRef
    seed: int
    def __init__(self, task: _Optional[_Union[_events_pb2.TaskRef, _Mapping]] = ..., seed: _Optional[int] = ...) -> None: ...

class ResetResponse(_message.Message):
    __slots__ = ("session_id", "task_text", "observation", "admissible_actions", "single_turn", "max_steps", "screenshot_png", "code_check")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_TEXT_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    ADMISSIBLE_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    SINGLE_TURN_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    SCREENSHOT_PNG_FIELD_NUMBER: _ClassVar[int]
    CODE_CHECK_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    task_text: str
    observation: str
    admissible_actions: _containers.RepeatedScalarFieldContainer[str]
    single_turn: bool
    max_steps: int
    screenshot_png: bytes
    code_check: _events_pb2.CodeCheck
    def __init__(self, session_id: _Optional[str] = ..., task_text: _Optional[str] = ..., observation: _Optional[str] = ..., admissible_actions: _Optional[_Iterable[str]] = ..., single_turn: _Optional[bool] = ..., max_steps: _Optional[int] = ..., screenshot_png: _Optional[bytes] = ..., code_check: _Optional[_Union[_events_pb2.CodeCheck, _Mapping]] = ...) -> None: ...

class StepRequest(_message.Message):
    __slots__ = ("session_id", "action")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    action: str
    def __init__(self, session_id: _Optional[str] = ..., action: _Optional[str] = ...) -> None: ...

class StepResponse(_message.Message):
    __slots__ = ("observation", "admissible_actions", "reward", "terminated", "truncated", "won", "oracle_label", "oracle_plan_length", "screenshot_png", "test_verdicts")
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    ADMISSIBLE_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    WON_FIELD_NUMBER: _ClassVar[int]
    ORACLE_LABEL_FIELD_NUMBER: _ClassVar[int]
    ORACLE_PLAN_LENGTH_FIELD_NUMBER: _ClassVar[int]
    SCREENSHOT_PNG_FIELD_NUMBER: _ClassVar[int]
    TEST_VERDICTS_FIELD_NUMBER: _ClassVar[int]
    observation: str
    admissible_actions: _containers.RepeatedScalarFieldContainer[str]
    reward: float
    terminated: bool
    truncated: bool
    won: bool
    oracle_label: _events_pb2.StepLabel
    oracle_plan_length: int
    screenshot_png: bytes
    test_verdicts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, observation: _Optional[str] = ..., admissible_actions: _Optional[_Iterable[str]] = ..., reward: _Optional[float] = ..., terminated: _Optional[bool] = ..., truncated: _Optional[bool] = ..., won: _Optional[bool] = ..., oracle_label: _Optional[_Union[_events_pb2.StepLabel, str]] = ..., oracle_plan_length: _Optional[int] = ..., screenshot_png: _Optional[bytes] = ..., test_verdicts: _Optional[_Iterable[str]] = ...) -> None: ...

class CloseRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CloseResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TaskVersion(_message.Message):
    __slots__ = ("version", "knobs", "seed", "oracle_plan_length", "parent_version", "created_round", "parent_acc", "direction", "created_from_job", "metadata")
    class KnobsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    KNOBS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    ORACLE_PLAN_LENGTH_FIELD_NUMBER: _ClassVar[int]
    PARENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATED_ROUND_FIELD_NUMBER: _ClassVar[int]
    PARENT_ACC_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    CREATED_FROM_JOB_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    version: int
    knobs: _containers.ScalarMap[str, float]
    seed: int
    oracle_plan_length: int
    parent_version: int
    created_round: int
    parent_acc: float
    direction: _events_pb2.Direction
    created_from_job: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, version: _Optional[int] = ..., knobs: _Optional[_Mapping[str, float]] = ..., seed: _Optional[int] = ..., oracle_plan_length: _Optional[int] = ..., parent_version: _Optional[int] = ..., created_round: _Optional[int] = ..., parent_acc: _Optional[float] = ..., direction: _Optional[_Union[_events_pb2.Direction, str]] = ..., created_from_job: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class TaskSlot(_message.Message):
    __slots__ = ("slot_id", "family", "split", "active", "history", "pending", "next_version", "last_acc", "last_round", "rejected", "has_acc")
    SLOT_ID_FIELD_NUMBER: _ClassVar[int]
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    NEXT_VERSION_FIELD_NUMBER: _ClassVar[int]
    LAST_ACC_FIELD_NUMBER: _ClassVar[int]
    LAST_ROUND_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    HAS_ACC_FIELD_NUMBER: _ClassVar[int]
    slot_id: str
    family: str
    split: str
    active: TaskVersion
    history: _containers.RepeatedCompositeFieldContainer[TaskVersion]
    pending: TaskVersion
    next_version: int
    last_acc: float
    last_round: int
    rejected: int
    has_acc: bool
    def __init__(self, slot_id: _Optional[str] = ..., family: _Optional[str] = ..., split: _Optional[str] = ..., active: _Optional[_Union[TaskVersion, _Mapping]] = ..., history: _Optional[_Iterable[_Union[TaskVersion, _Mapping]]] = ..., pending: _Optional[_Union[TaskVersion, _Mapping]] = ..., next_version: _Optional[int] = ..., last_acc: _Optional[float] = ..., last_round: _Optional[int] = ..., rejected: _Optional[int] = ..., has_acc: _Optional[bool] = ...) -> None: ...

class SchedulerState(_message.Message):
    __slots__ = ("next_round", "open_jobs", "jobs_published", "candidate_jobs", "reported_early")
    NEXT_ROUND_FIELD_NUMBER: _ClassVar[int]
    OPEN_JOBS_FIELD_NUMBER: _ClassVar[int]
    JOBS_PUBLISHED_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_JOBS_FIELD_NUMBER: _ClassVar[int]
    REPORTED_EARLY_FIELD_NUMBER: _ClassVar[int]
    next_round: int
    open_jobs: _containers.RepeatedScalarFieldContainer[str]
    jobs_published: int
    candidate_jobs: _containers.RepeatedScalarFieldContainer[str]
    reported_early: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, next_round: _Optional[int] = ..., open_jobs: _Optional[_Iterable[str]] = ..., jobs_published: _Optional[int] = ..., candidate_jobs: _Optional[_Iterable[str]] = ..., reported_early: _Optional[_Iterable[str]] = ...) -> None: ...
