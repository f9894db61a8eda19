from rlanything.v1 import events_pb2 as _events_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StepToJudge(_message.Message):
    __slots__ = ("step_id", "task_text", "prompt", "response", "next_observation", "oracle_label", "rubric")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_TEXT_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    NEXT_OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    ORACLE_LABEL_FIELD_NUMBER: _ClassVar[int]
    RUBRIC_FIELD_NUMBER: _ClassVar[int]
    step_id: str
    task_text: str
    prompt: str
    response: str
    next_observation: str
    oracle_label: _events_pb2.StepLabel
    rubric: str
    def __init__(self, step_id: _Optional[str] = ..., task_text: _Optional[str] = ..., prompt: _Optional[str] = ..., response: _Optional[str] = ..., next_observation: _Optional[str] = ..., oracle_label: _Optional[_Union[_events_pb2.StepLabel, str]] = ..., rubric: _Optional[str] = ...) -> None: ...

class JudgeStepsRequest(_message.Message):
    __slots__ = ("steps", "votes", "temperature", "greedy")
    STEPS_FIELD_NUMBER: _ClassVar[int]
    VOTES_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    GREEDY_FIELD_NUMBER: _ClassVar[int]
    steps: _containers.RepeatedCompositeFieldContainer[StepToJudge]
    votes: int
    temperature: float
    greedy: bool
    def __init__(self, steps: _Optional[_Iterable[_Union[StepToJudge, _Mapping]]] = ..., votes: _Optional[int] = ..., temperature: _Optional[float] = ..., greedy: _Optional[bool] = ...) -> None: ...

class JudgeStepsResponse(_message.Message):
    __slots__ = ("judgements", "model_version")
    JUDGEMENTS_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    judgements: _containers.RepeatedCompositeFieldContainer[_events_pb2.StepJudgement]
    model_version: int
    def __init__(self, judgements: _Optional[_Iterable[_Union[_events_pb2.StepJudgement, _Mapping]]] = ..., model_version: _Optional[int] = ...) -> None: ...
