from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OutcomeSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_SOURCE_UNSPECIFIED: _ClassVar[OutcomeSource]
    OUTCOME_SOURCE_USER: _ClassVar[OutcomeSource]
    OUTCOME_SOURCE_PRODUCT: _ClassVar[OutcomeSource]
    OUTCOME_SOURCE_REFERENCE_CHECK: _ClassVar[OutcomeSource]
OUTCOME_SOURCE_UNSPECIFIED: OutcomeSource
OUTCOME_SOURCE_USER: OutcomeSource
OUTCOME_SOURCE_PRODUCT: OutcomeSource
OUTCOME_SOURCE_REFERENCE_CHECK: OutcomeSource

class Consent(_message.Message):
    __slots__ = ("training", "task_generation", "retention_days")
    TRAINING_FIELD_NUMBER: _ClassVar[int]
    TASK_GENERATION_FIELD_NUMBER: _ClassVar[int]
    RETENTION_DAYS_FIELD_NUMBER: _ClassVar[int]
    training: bool
    task_generation: bool
    retention_days: int
    def __init__(self, training: _Optional[bool] = ..., task_generation: _Optional[bool] = ..., retention_days: _Optional[int] = ...) -> None: ...

class IngestMessage(_message.Message):
    __slots__ = ("turn_id", "role", "content", "completion_id", "created_unix_s")
    TURN_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    turn_id: str
    role: str
    content: str
    completion_id: str
    created_unix_s: float
    def __init__(self, turn_id: _Optional[str] = ..., role: _Optional[str] = ..., content: _Optional[str] = ..., completion_id: _Optional[str] = ..., created_unix_s: _Optional[float] = ...) -> None: ...

class Outcome(_message.Message):
    __slots__ = ("value", "source", "reference", "detail")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    value: int
    source: OutcomeSource
    reference: str
    detail: str
    def __init__(self, value: _Optional[int] = ..., source: _Optional[_Union[OutcomeSource, str]] = ..., reference: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class IngestEpisode(_message.Message):
    __slots__ = ("tenant", "episode_id", "revision", "ended", "consent", "user_ref", "task_type", "product_version", "labels", "messages", "outcome", "redactions", "content_hash", "received_unix_s")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class RedactionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    TENANT_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    CONSENT_FIELD_NUMBER: _ClassVar[int]
    USER_REF_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_VERSION_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REDACTIONS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    episode_id: str
    revision: int
    ended: bool
    consent: Consent
    user_ref: str
    task_type: str
    product_version: str
    labels: _containers.ScalarMap[str, str]
    messages: _containers.RepeatedCompositeFieldContainer[IngestMessage]
    outcome: Outcome
    redactions: _containers.ScalarMap[str, int]
    content_hash: str
    received_unix_s: float
    def __init__(self, tenant: _Optional[str] = ..., episode_id: _Optional[str] = ..., revision: _Optional[int] = ..., ended: _Optional[bool] = ..., consent: _Optional[_Union[Consent, _Mapping]] = ..., user_ref: _Optional[str] = ..., task_type: _Optional[str] = ..., product_version: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., messages: _Optional[_Iterable[_Union[IngestMessage, _Mapping]]] = ..., outcome: _Optional[_Union[Outcome, _Mapping]] = ..., redactions: _Optional[_Mapping[str, int]] = ..., content_hash: _Optional[str] = ..., received_unix_s: _Optional[float] = ...) -> None: ...

class RecordEpisodeRequest(_message.Message):
    __slots__ = ("episode",)
    EPISODE_FIELD_NUMBER: _ClassVar[int]
    episode: IngestEpisode
    def __init__(self, episode: _Optional[_Union[IngestEpisode, _Mapping]] = ...) -> None: ...

class Feedback(_message.Message):
    __slots__ = ("tenant", "feedback_id", "episode_id", "turn_id", "kind", "value", "text", "created_unix_s")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[Feedback.Kind]
        KIND_THUMBS: _ClassVar[Feedback.Kind]
        KIND_RATING: _ClassVar[Feedback.Kind]
        KIND_OUTCOME: _ClassVar[Feedback.Kind]
        KIND_CORRECTION: _ClassVar[Feedback.Kind]
        KIND_TEXT: _ClassVar[Feedback.Kind]
    KIND_UNSPECIFIED: Feedback.Kind
    KIND_THUMBS: Feedback.Kind
    KIND_RATING: Feedback.Kind
    KIND_OUTCOME: Feedback.Kind
    KIND_CORRECTION: Feedback.Kind
    KIND_TEXT: Feedback.Kind
    TENANT_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_ID_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    TURN_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CREATED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    feedback_id: str
    episode_id: str
    turn_id: str
    kind: Feedback.Kind
    value: float
    text: str
    created_unix_s: float
    def __init__(self, tenant: _Optional[str] = ..., feedback_id: _Optional[str] = ..., episode_id: _Optional[str] = ..., turn_id: _Optional[str] = ..., kind: _Optional[_Union[Feedback.Kind, str]] = ..., value: _Optional[float] = ..., text: _Optional[str] = ..., created_unix_s: _Optional[float] = ...) -> None: ...

class RecordFeedbackRequest(_message.Message):
    __slots__ = ("feedback",)
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    feedback: Feedback
    def __init__(self, feedback: _Optional[_Union[Feedback, _Mapping]] = ...) -> None: ...

class IngestAck(_message.Message):
    __slots__ = ("status", "episode_id", "revision")
    class Status(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        STATUS_UNSPECIFIED: _ClassVar[IngestAck.Status]
        STATUS_ACCEPTED: _ClassVar[IngestAck.Status]
        STATUS_DUPLICATE: _ClassVar[IngestAck.Status]
        STATUS_SUPERSEDED: _ClassVar[IngestAck.Status]
        STATUS_APPLIED: _ClassVar[IngestAck.Status]
        STATUS_BUFFERED: _ClassVar[IngestAck.Status]
        STATUS_LATE: _ClassVar[IngestAck.Status]
    STATUS_UNSPECIFIED: IngestAck.Status
    STATUS_ACCEPTED: IngestAck.Status
    STATUS_DUPLICATE: IngestAck.Status
    STATUS_SUPERSEDED: IngestAck.Status
    STATUS_APPLIED: IngestAck.Status
    STATUS_BUFFERED: IngestAck.Status
    STATUS_LATE: IngestAck.Status
    STATUS_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    status: IngestAck.Status
    episode_id: str
    revision: int
    def __init__(self, status: _Optional[_Union[IngestAck.Status, str]] = ..., episode_id: _Optional[str] = ..., revision: _Optional[int] = ...) -> None: ...

class GetEpisodeRequest(_message.Message):
    __slots__ = ("tenant", "episode_id")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    episode_id: str
    def __init__(self, tenant: _Optional[str] = ..., episode_id: _Optional[str] = ...) -> None: ...

class EpisodeStatus(_message.Message):
    __slots__ = ("episode_id", "state", "revision", "messages", "feedback", "redactions", "settle_deadline_unix_s", "late_feedback")
    class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        STATE_UNSPECIFIED: _ClassVar[EpisodeStatus.State]
        STATE_OPEN: _ClassVar[EpisodeStatus.State]
        STATE_CLOSED: _ClassVar[EpisodeStatus.State]
        STATE_SETTLED: _ClassVar[EpisodeStatus.State]
    STATE_UNSPECIFIED: EpisodeStatus.State
    STATE_OPEN: EpisodeStatus.State
    STATE_CLOSED: EpisodeStatus.State
    STATE_SETTLED: EpisodeStatus.State
    class RedactionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    REDACTIONS_FIELD_NUMBER: _ClassVar[int]
    SETTLE_DEADLINE_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    LATE_FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    state: EpisodeStatus.State
    revision: int
    messages: int
    feedback: int
    redactions: _containers.ScalarMap[str, int]
    settle_deadline_unix_s: float
    late_feedback: int
    def __init__(self, episode_id: _Optional[str] = ..., state: _Optional[_Union[EpisodeStatus.State, str]] = ..., revision: _Optional[int] = ..., messages: _Optional[int] = ..., feedback: _Optional[int] = ..., redactions: _Optional[_Mapping[str, int]] = ..., settle_deadline_unix_s: _Optional[float] = ..., late_feedback: _Optional[int] = ...) -> None: ...

class SettledEpisode(_message.Message):
    __slots__ = ("episode", "feedback", "late_feedback", "erasure_epoch")
    EPISODE_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    LATE_FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    ERASURE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    episode: IngestEpisode
    feedback: _containers.RepeatedCompositeFieldContainer[Feedback]
    late_feedback: int
    erasure_epoch: int
    def __init__(self, episode: _Optional[_Union[IngestEpisode, _Mapping]] = ..., feedback: _Optional[_Iterable[_Union[Feedback, _Mapping]]] = ..., late_feedback: _Optional[int] = ..., erasure_epoch: _Optional[int] = ...) -> None: ...

class EpisodeRecord(_message.Message):
    __slots__ = ("episode", "state", "settle_deadline_unix_s", "feedback", "feedback_ids", "late_feedback", "user_hash", "stream_seqs", "expires_unix_s", "traj_seqs", "erasure_epoch")
    EPISODE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SETTLE_DEADLINE_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_IDS_FIELD_NUMBER: _ClassVar[int]
    LATE_FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    USER_HASH_FIELD_NUMBER: _ClassVar[int]
    STREAM_SEQS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    TRAJ_SEQS_FIELD_NUMBER: _ClassVar[int]
    ERASURE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    episode: IngestEpisode
    state: EpisodeStatus.State
    settle_deadline_unix_s: float
    feedback: _containers.RepeatedCompositeFieldContainer[Feedback]
    feedback_ids: _containers.RepeatedScalarFieldContainer[str]
    late_feedback: int
    user_hash: str
    stream_seqs: _containers.RepeatedScalarFieldContainer[int]
    expires_unix_s: float
    traj_seqs: _containers.RepeatedScalarFieldContainer[int]
    erasure_epoch: int
    def __init__(self, episode: _Optional[_Union[IngestEpisode, _Mapping]] = ..., state: _Optional[_Union[EpisodeStatus.State, str]] = ..., settle_deadline_unix_s: _Optional[float] = ..., feedback: _Optional[_Iterable[_Union[Feedback, _Mapping]]] = ..., feedback_ids: _Optional[_Iterable[str]] = ..., late_feedback: _Optional[int] = ..., user_hash: _Optional[str] = ..., stream_seqs: _Optional[_Iterable[int]] = ..., expires_unix_s: _Optional[float] = ..., traj_seqs: _Optional[_Iterable[int]] = ..., erasure_epoch: _Optional[int] = ...) -> None: ...

class EpisodesErased(_message.Message):
    __slots__ = ("tenant", "episode_ids", "trajectory_ids", "erasure_epoch")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    EPISODE_IDS_FIELD_NUMBER: _ClassVar[int]
    TRAJECTORY_IDS_FIELD_NUMBER: _ClassVar[int]
    ERASURE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    episode_ids: _containers.RepeatedScalarFieldContainer[str]
    trajectory_ids: _containers.RepeatedScalarFieldContainer[str]
    erasure_epoch: int
    def __init__(self, tenant: _Optional[str] = ..., episode_ids: _Optional[_Iterable[str]] = ..., trajectory_ids: _Optional[_Iterable[str]] = ..., erasure_epoch: _Optional[int] = ...) -> None: ...

class CapturedCompletion(_message.Message):
    __slots__ = ("tenant", "episode_id", "turn_id", "completion_id", "prompt", "response", "prompt_token_ids", "response_token_ids", "logprobs", "model_version", "temperature", "top_p", "retokenize", "consent", "created_unix_s", "redactions")
    class RedactionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    TENANT_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    TURN_ID_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    RETOKENIZE_FIELD_NUMBER: _ClassVar[int]
    CONSENT_FIELD_NUMBER: _ClassVar[int]
    CREATED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    REDACTIONS_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    episode_id: str
    turn_id: str
    completion_id: str
    prompt: _containers.RepeatedCompositeFieldContainer[IngestMessage]
    response: str
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    response_token_ids: _containers.RepeatedScalarFieldContainer[int]
    logprobs: _containers.RepeatedScalarFieldContainer[float]
    model_version: int
    temperature: float
    top_p: float
    retokenize: bool
    consent: Consent
    created_unix_s: float
    redactions: _containers.ScalarMap[str, int]
    def __init__(self, tenant: _Optional[str] = ..., episode_id: _Optional[str] = ..., turn_id: _Optional[str] = ..., completion_id: _Optional[str] = ..., prompt: _Optional[_Iterable[_Union[IngestMessage, _Mapping]]] = ..., response: _Optional[str] = ..., prompt_token_ids: _Optional[_Iterable[int]] = ..., response_token_ids: _Optional[_Iterable[int]] = ..., logprobs: _Optional[_Iterable[float]] = ..., model_version: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., retokenize: _Optional[bool] = ..., consent: _Optional[_Union[Consent, _Mapping]] = ..., created_unix_s: _Optional[float] = ..., redactions: _Optional[_Mapping[str, int]] = ...) -> None: ...

class EraseUserRequest(_message.Message):
    __slots__ = ("tenant", "user_ref")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    USER_REF_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    user_ref: str
    def __init__(self, tenant: _Optional[str] = ..., user_ref: _Optional[str] = ...) -> None: ...

class EraseUserResponse(_message.Message):
    __slots__ = ("episodes_erased", "messages_deleted")
    EPISODES_ERASED_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_DELETED_FIELD_NUMBER: _ClassVar[int]
    episodes_erased: int
    messages_deleted: int
    def __init__(self, episodes_erased: _Optional[int] = ..., messages_deleted: _Optional[int] = ...) -> None: ...

class PurgeTenantRequest(_message.Message):
    __slots__ = ("tenant",)
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    def __init__(self, tenant: _Optional[str] = ...) -> None: ...

class PurgeTenantResponse(_message.Message):
    __slots__ = ("messages_deleted", "keys_deleted")
    MESSAGES_DELETED_FIELD_NUMBER: _ClassVar[int]
    KEYS_DELETED_FIELD_NUMBER: _ClassVar[int]
    messages_deleted: int
    keys_deleted: int
    def __init__(self, messages_deleted: _Optional[int] = ..., keys_deleted: _Optional[int] = ...) -> None: ...

class LiveTaskCandidate(_message.Message):
    __slots__ = ("tenant", "candidate_id", "source_trajectory_id", "task_type", "prompt", "reference", "hint", "created_unix_s")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TRAJECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    HINT_FIELD_NUMBER: _ClassVar[int]
    CREATED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    candidate_id: str
    source_trajectory_id: str
    task_type: str
    prompt: str
    reference: str
    hint: str
    created_unix_s: float
    def __init__(self, tenant: _Optional[str] = ..., candidate_id: _Optional[str] = ..., source_trajectory_id: _Optional[str] = ..., task_type: _Optional[str] = ..., prompt: _Optional[str] = ..., reference: _Optional[str] = ..., hint: _Optional[str] = ..., created_unix_s: _Optional[float] = ...) -> None: ...
