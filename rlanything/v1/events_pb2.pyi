from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ModelRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MODEL_ROLE_UNSPECIFIED: _ClassVar[ModelRole]
    MODEL_ROLE_POLICY: _ClassVar[ModelRole]
    MODEL_ROLE_REWARD_MODEL: _ClassVar[ModelRole]

class StepLabel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STEP_LABEL_UNSPECIFIED: _ClassVar[StepLabel]
    STEP_LABEL_GOOD: _ClassVar[StepLabel]
    STEP_LABEL_BAD: _ClassVar[StepLabel]

class Direction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DIRECTION_UNSPECIFIED: _ClassVar[Direction]
    DIRECTION_HARDER: _ClassVar[Direction]
    DIRECTION_EASIER: _ClassVar[Direction]
MODEL_ROLE_UNSPECIFIED: ModelRole
MODEL_ROLE_POLICY: ModelRole
MODEL_ROLE_REWARD_MODEL: ModelRole
STEP_LABEL_UNSPECIFIED: StepLabel
STEP_LABEL_GOOD: StepLabel
STEP_LABEL_BAD: StepLabel
DIRECTION_UNSPECIFIED: Direction
DIRECTION_HARDER: Direction
DIRECTION_EASIER: Direction

class TaskRef(_message.Message):
    __slots__ = ("slot_id", "version", "family")
    SLOT_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    slot_id: str
    version: int
    family: str
    def __init__(self, slot_id: _Optional[str] = ..., version: _Optional[int] = ..., family: _Optional[str] = ...) -> None: ...

class SamplingParams(_message.Message):
    __slots__ = ("temperature", "top_p", "max_new_tokens", "stop", "seed")
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    MAX_NEW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    temperature: float
    top_p: float
    max_new_tokens: int
    stop: _containers.RepeatedScalarFieldContainer[str]
    seed: int
    def __init__(self, temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., max_new_tokens: _Optional[int] = ..., stop: _Optional[_Iterable[str]] = ..., seed: _Optional[int] = ...) -> None: ...

class CandidateCheck(_message.Message):
    __slots__ = ("direction", "parent_acc", "band_low", "band_high")
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    PARENT_ACC_FIELD_NUMBER: _ClassVar[int]
    BAND_LOW_FIELD_NUMBER: _ClassVar[int]
    BAND_HIGH_FIELD_NUMBER: _ClassVar[int]
    direction: Direction
    parent_acc: float
    band_low: float
    band_high: float
    def __init__(self, direction: _Optional[_Union[Direction, str]] = ..., parent_acc: _Optional[float] = ..., band_low: _Optional[float] = ..., band_high: _Optional[float] = ...) -> None: ...

class RolloutJob(_message.Message):
    __slots__ = ("job_id", "round", "task", "group_size", "sampling", "min_policy_version", "max_steps", "seeds", "is_candidate", "split", "jobs_in_round", "candidate_check")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    MIN_POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    SEEDS_FIELD_NUMBER: _ClassVar[int]
    IS_CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    JOBS_IN_ROUND_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_CHECK_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    round: int
    task: TaskRef
    group_size: int
    sampling: SamplingParams
    min_policy_version: int
    max_steps: int
    seeds: _containers.RepeatedScalarFieldContainer[int]
    is_candidate: bool
    split: str
    jobs_in_round: int
    candidate_check: CandidateCheck
    def __init__(self, job_id: _Optional[str] = ..., round: _Optional[int] = ..., task: _Optional[_Union[TaskRef, _Mapping]] = ..., group_size: _Optional[int] = ..., sampling: _Optional[_Union[SamplingParams, _Mapping]] = ..., min_policy_version: _Optional[int] = ..., max_steps: _Optional[int] = ..., seeds: _Optional[_Iterable[int]] = ..., is_candidate: _Optional[bool] = ..., split: _Optional[str] = ..., jobs_in_round: _Optional[int] = ..., candidate_check: _Optional[_Union[CandidateCheck, _Mapping]] = ...) -> None: ...

class TrajectoryStep(_message.Message):
    __slots__ = ("index", "prompt", "response", "prompt_token_ids", "response_token_ids", "behaviour_logprobs", "action", "action_index", "valid", "observation", "next_observation", "oracle_label", "env_reward", "response_truncated", "turn_id", "served_by_policy", "served_version")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    BEHAVIOUR_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    ACTION_INDEX_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    NEXT_OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    ORACLE_LABEL_FIELD_NUMBER: _ClassVar[int]
    ENV_REWARD_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    TURN_ID_FIELD_NUMBER: _ClassVar[int]
    SERVED_BY_POLICY_FIELD_NUMBER: _ClassVar[int]
    SERVED_VERSION_FIELD_NUMBER: _ClassVar[int]
    index: int
    prompt: str
    response: str
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    response_token_ids: _containers.RepeatedScalarFieldContainer[int]
    behaviour_logprobs: _containers.RepeatedScalarFieldContainer[float]
    action: str
    action_index: int
    valid: bool
    observation: str
    next_observation: str
    oracle_label: StepLabel
    env_reward: float
    response_truncated: bool
    turn_id: str
    served_by_policy: bool
    served_version: int
    def __init__(self, index: _Optional[int] = ..., prompt: _Optional[str] = ..., response: _Optional[str] = ..., prompt_token_ids: _Optional[_Iterable[int]] = ..., response_token_ids: _Optional[_Iterable[int]] = ..., behaviour_logprobs: _Optional[_Iterable[float]] = ..., action: _Optional[str] = ..., action_index: _Optional[int] = ..., valid: _Optional[bool] = ..., observation: _Optional[str] = ..., next_observation: _Optional[str] = ..., oracle_label: _Optional[_Union[StepLabel, str]] = ..., env_reward: _Optional[float] = ..., response_truncated: _Optional[bool] = ..., turn_id: _Optional[str] = ..., served_by_policy: _Optional[bool] = ..., served_version: _Optional[int] = ...) -> None: ...

class Trajectory(_message.Message):
    __slots__ = ("trajectory_id", "job_id", "round", "task", "rollout_index", "group_size", "task_text", "steps", "outcome", "truncated", "policy_version", "generate_s", "env_s", "is_candidate", "split", "source", "jobs_in_round", "tenant", "episode_id", "outcome_source", "task_type", "candidate_check", "code_check")
    TRAJECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    TASK_TEXT_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    GENERATE_S_FIELD_NUMBER: _ClassVar[int]
    ENV_S_FIELD_NUMBER: _ClassVar[int]
    IS_CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    JOBS_IN_ROUND_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_SOURCE_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_CHECK_FIELD_NUMBER: _ClassVar[int]
    CODE_CHECK_FIELD_NUMBER: _ClassVar[int]
    trajectory_id: str
    job_id: str
    round: int
    task: TaskRef
    rollout_index: int
    group_size: int
    task_text: str
    steps: _containers.RepeatedCompositeFieldContainer[TrajectoryStep]
    outcome: int
    truncated: bool
    policy_version: int
    generate_s: float
    env_s: float
    is_candidate: bool
    split: str
    source: str
    jobs_in_round: int
    tenant: str
    episode_id: str
    outcome_source: str
    task_type: str
    candidate_check: CandidateCheck
    code_check: CodeCheck
    def __init__(self, trajectory_id: _Optional[str] = ..., job_id: _Optional[str] = ..., round: _Optional[int] = ..., task: _Optional[_Union[TaskRef, _Mapping]] = ..., rollout_index: _Optional[int] = ..., group_size: _Optional[int] = ..., task_text: _Optional[str] = ..., steps: _Optional[_Iterable[_Union[TrajectoryStep, _Mapping]]] = ..., outcome: _Optional[int] = ..., truncated: _Optional[bool] = ..., policy_version: _Optional[int] = ..., generate_s: _Optional[float] = ..., env_s: _Optional[float] = ..., is_candidate: _Optional[bool] = ..., split: _Optional[str] = ..., source: _Optional[str] = ..., jobs_in_round: _Optional[int] = ..., tenant: _Optional[str] = ..., episode_id: _Optional[str] = ..., outcome_source: _Optional[str] = ..., task_type: _Optional[str] = ..., candidate_check: _Optional[_Union[CandidateCheck, _Mapping]] = ..., code_check: _Optional[_Union[CodeCheck, _Mapping]] = ...) -> None: ...

class CodeCheck(_message.Message):
    __slots__ = ("input_validator", "reference", "checker")
    INPUT_VALIDATOR_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    CHECKER_FIELD_NUMBER: _ClassVar[int]
    input_validator: str
    reference: str
    checker: str
    def __init__(self, input_validator: _Optional[str] = ..., reference: _Optional[str] = ..., checker: _Optional[str] = ...) -> None: ...

class Vote(_message.Message):
    __slots__ = ("value", "response", "response_token_ids", "behaviour_logprobs")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    BEHAVIOUR_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    value: int
    response: str
    response_token_ids: _containers.RepeatedScalarFieldContainer[int]
    behaviour_logprobs: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, value: _Optional[int] = ..., response: _Optional[str] = ..., response_token_ids: _Optional[_Iterable[int]] = ..., behaviour_logprobs: _Optional[_Iterable[float]] = ...) -> None: ...

class StepJudgement(_message.Message):
    __slots__ = ("step_index", "judge_prompt", "prompt_token_ids", "votes", "mean_vote")
    STEP_INDEX_FIELD_NUMBER: _ClassVar[int]
    JUDGE_PROMPT_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    VOTES_FIELD_NUMBER: _ClassVar[int]
    MEAN_VOTE_FIELD_NUMBER: _ClassVar[int]
    step_index: int
    judge_prompt: str
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    votes: _containers.RepeatedCompositeFieldContainer[Vote]
    mean_vote: float
    def __init__(self, step_index: _Optional[int] = ..., judge_prompt: _Optional[str] = ..., prompt_token_ids: _Optional[_Iterable[int]] = ..., votes: _Optional[_Iterable[_Union[Vote, _Mapping]]] = ..., mean_vote: _Optional[float] = ...) -> None: ...

class JudgedTrajectory(_message.Message):
    __slots__ = ("trajectory", "judgements", "reward_model_version", "judge_s")
    TRAJECTORY_FIELD_NUMBER: _ClassVar[int]
    JUDGEMENTS_FIELD_NUMBER: _ClassVar[int]
    REWARD_MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    JUDGE_S_FIELD_NUMBER: _ClassVar[int]
    trajectory: Trajectory
    judgements: _containers.RepeatedCompositeFieldContainer[StepJudgement]
    reward_model_version: int
    judge_s: float
    def __init__(self, trajectory: _Optional[_Union[Trajectory, _Mapping]] = ..., judgements: _Optional[_Iterable[_Union[StepJudgement, _Mapping]]] = ..., reward_model_version: _Optional[int] = ..., judge_s: _Optional[float] = ...) -> None: ...

class TrainingSample(_message.Message):
    __slots__ = ("sample_id", "prompt_token_ids", "response_token_ids", "behaviour_logprobs", "advantage", "model_version")
    SAMPLE_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    BEHAVIOUR_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    ADVANTAGE_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    sample_id: str
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    response_token_ids: _containers.RepeatedScalarFieldContainer[int]
    behaviour_logprobs: _containers.RepeatedScalarFieldContainer[float]
    advantage: float
    model_version: int
    def __init__(self, sample_id: _Optional[str] = ..., prompt_token_ids: _Optional[_Iterable[int]] = ..., response_token_ids: _Optional[_Iterable[int]] = ..., behaviour_logprobs: _Optional[_Iterable[float]] = ..., advantage: _Optional[float] = ..., model_version: _Optional[int] = ...) -> None: ...

class PolicySampleBatch(_message.Message):
    __slots__ = ("batch_id", "round", "task", "samples", "jobs_in_round", "live")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    JOBS_IN_ROUND_FIELD_NUMBER: _ClassVar[int]
    LIVE_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    round: int
    task: TaskRef
    samples: _containers.RepeatedCompositeFieldContainer[TrainingSample]
    jobs_in_round: int
    live: bool
    def __init__(self, batch_id: _Optional[str] = ..., round: _Optional[int] = ..., task: _Optional[_Union[TaskRef, _Mapping]] = ..., samples: _Optional[_Iterable[_Union[TrainingSample, _Mapping]]] = ..., jobs_in_round: _Optional[int] = ..., live: _Optional[bool] = ...) -> None: ...

class RewardSampleBatch(_message.Message):
    __slots__ = ("batch_id", "round", "task", "samples", "jobs_in_round", "live")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    JOBS_IN_ROUND_FIELD_NUMBER: _ClassVar[int]
    LIVE_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    round: int
    task: TaskRef
    samples: _containers.RepeatedCompositeFieldContainer[TrainingSample]
    jobs_in_round: int
    live: bool
    def __init__(self, batch_id: _Optional[str] = ..., round: _Optional[int] = ..., task: _Optional[_Union[TaskRef, _Mapping]] = ..., samples: _Optional[_Iterable[_Union[TrainingSample, _Mapping]]] = ..., jobs_in_round: _Optional[int] = ..., live: _Optional[bool] = ...) -> None: ...

class BadSteps(_message.Message):
    __slots__ = ("trajectory_id", "step_indices", "actions")
    TRAJECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_INDICES_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    trajectory_id: str
    step_indices: _containers.RepeatedScalarFieldContainer[int]
    actions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, trajectory_id: _Optional[str] = ..., step_indices: _Optional[_Iterable[int]] = ..., actions: _Optional[_Iterable[str]] = ...) -> None: ...

class TaskReport(_message.Message):
    __slots__ = ("job_id", "round", "task", "group_size", "rollouts", "wins", "acc", "direction", "bad_steps", "is_candidate", "partial", "split", "jobs_in_round")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    WINS_FIELD_NUMBER: _ClassVar[int]
    ACC_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    BAD_STEPS_FIELD_NUMBER: _ClassVar[int]
    IS_CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    JOBS_IN_ROUND_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    round: int
    task: TaskRef
    group_size: int
    rollouts: int
    wins: int
    acc: float
    direction: Direction
    bad_steps: _containers.RepeatedCompositeFieldContainer[BadSteps]
    is_candidate: bool
    partial: bool
    split: str
    jobs_in_round: int
    def __init__(self, job_id: _Optional[str] = ..., round: _Optional[int] = ..., task: _Optional[_Union[TaskRef, _Mapping]] = ..., group_size: _Optional[int] = ..., rollouts: _Optional[int] = ..., wins: _Optional[int] = ..., acc: _Optional[float] = ..., direction: _Optional[_Union[Direction, str]] = ..., bad_steps: _Optional[_Iterable[_Union[BadSteps, _Mapping]]] = ..., is_candidate: _Optional[bool] = ..., partial: _Optional[bool] = ..., split: _Optional[str] = ..., jobs_in_round: _Optional[int] = ...) -> None: ...

class ModelVersion(_message.Message):
    __slots__ = ("role", "version", "uri", "sha256", "trained_on_round", "published_unix_s", "metrics", "batch_keys", "start_sha256", "weights_sha256")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ROLE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    TRAINED_ON_ROUND_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    BATCH_KEYS_FIELD_NUMBER: _ClassVar[int]
    START_SHA256_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_SHA256_FIELD_NUMBER: _ClassVar[int]
    role: ModelRole
    version: int
    uri: str
    sha256: str
    trained_on_round: int
    published_unix_s: float
    metrics: _containers.ScalarMap[str, float]
    batch_keys: _containers.RepeatedScalarFieldContainer[str]
    start_sha256: str
    weights_sha256: str
    def __init__(self, role: _Optional[_Union[ModelRole, str]] = ..., version: _Optional[int] = ..., uri: _Optional[str] = ..., sha256: _Optional[str] = ..., trained_on_round: _Optional[int] = ..., published_unix_s: _Optional[float] = ..., metrics: _Optional[_Mapping[str, float]] = ..., batch_keys: _Optional[_Iterable[str]] = ..., start_sha256: _Optional[str] = ..., weights_sha256: _Optional[str] = ...) -> None: ...

class TaskPoolEvent(_message.Message):
    __slots__ = ("event_id", "round", "kind", "direction", "parent", "candidate", "acc_prev", "acc_new", "reason")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[TaskPoolEvent.Kind]
        KIND_REQUESTED: _ClassVar[TaskPoolEvent.Kind]
        KIND_PROPOSED: _ClassVar[TaskPoolEvent.Kind]
        KIND_REJECTED_UNDEPLOYABLE: _ClassVar[TaskPoolEvent.Kind]
        KIND_ACCEPTED: _ClassVar[TaskPoolEvent.Kind]
        KIND_REJECTED: _ClassVar[TaskPoolEvent.Kind]
    KIND_UNSPECIFIED: TaskPoolEvent.Kind
    KIND_REQUESTED: TaskPoolEvent.Kind
    KIND_PROPOSED: TaskPoolEvent.Kind
    KIND_REJECTED_UNDEPLOYABLE: TaskPoolEvent.Kind
    KIND_ACCEPTED: TaskPoolEvent.Kind
    KIND_REJECTED: TaskPoolEvent.Kind
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    ACC_PREV_FIELD_NUMBER: _ClassVar[int]
    ACC_NEW_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    round: int
    kind: TaskPoolEvent.Kind
    direction: Direction
    parent: TaskRef
    candidate: TaskRef
    acc_prev: float
    acc_new: float
    reason: str
    def __init__(self, event_id: _Optional[str] = ..., round: _Optional[int] = ..., kind: _Optional[_Union[TaskPoolEvent.Kind, str]] = ..., direction: _Optional[_Union[Direction, str]] = ..., parent: _Optional[_Union[TaskRef, _Mapping]] = ..., candidate: _Optional[_Union[TaskRef, _Mapping]] = ..., acc_prev: _Optional[float] = ..., acc_new: _Optional[float] = ..., reason: _Optional[str] = ...) -> None: ...

class RoundMetrics(_message.Message):
    __slots__ = ("round", "values", "published_unix_s")
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ROUND_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    round: int
    values: _containers.ScalarMap[str, float]
    published_unix_s: float
    def __init__(self, round: _Optional[int] = ..., values: _Optional[_Mapping[str, float]] = ..., published_unix_s: _Optional[float] = ...) -> None: ...
