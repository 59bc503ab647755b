from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class VerifyErrorKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERIFY_ERROR_KIND_UNSPECIFIED: _ClassVar[VerifyErrorKind]
    VERIFY_ERROR_KIND_INVALID_REQUEST: _ClassVar[VerifyErrorKind]
    VERIFY_ERROR_KIND_VERIFY_FAILED: _ClassVar[VerifyErrorKind]
    VERIFY_ERROR_KIND_TIMEOUT: _ClassVar[VerifyErrorKind]
    VERIFY_ERROR_KIND_GENERATION: _ClassVar[VerifyErrorKind]

class ValueKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VALUE_KIND_UNSPECIFIED: _ClassVar[ValueKind]
    VALUE_KIND_FLOAT: _ClassVar[ValueKind]
    VALUE_KIND_INT: _ClassVar[ValueKind]
    VALUE_KIND_BOOL: _ClassVar[ValueKind]
VERIFY_ERROR_KIND_UNSPECIFIED: VerifyErrorKind
VERIFY_ERROR_KIND_INVALID_REQUEST: VerifyErrorKind
VERIFY_ERROR_KIND_VERIFY_FAILED: VerifyErrorKind
VERIFY_ERROR_KIND_TIMEOUT: VerifyErrorKind
VERIFY_ERROR_KIND_GENERATION: VerifyErrorKind
VALUE_KIND_UNSPECIFIED: ValueKind
VALUE_KIND_FLOAT: ValueKind
VALUE_KIND_INT: ValueKind
VALUE_KIND_BOOL: ValueKind

class AgentRef(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class VerifyRequest(_message.Message):
    __slots__ = ("body_json", "session_id")
    BODY_JSON_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    body_json: str
    session_id: str
    def __init__(self, body_json: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class VerifyResponse(_message.Message):
    __slots__ = ("reward", "response_json")
    REWARD_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_JSON_FIELD_NUMBER: _ClassVar[int]
    reward: float
    response_json: str
    def __init__(self, reward: _Optional[float] = ..., response_json: _Optional[str] = ...) -> None: ...

class VerifyItem(_message.Message):
    __slots__ = ("task_index", "rollout_index", "body_json")
    TASK_INDEX_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    BODY_JSON_FIELD_NUMBER: _ClassVar[int]
    task_index: int
    rollout_index: int
    body_json: str
    def __init__(self, task_index: _Optional[int] = ..., rollout_index: _Optional[int] = ..., body_json: _Optional[str] = ...) -> None: ...

class VerifyStreamRequest(_message.Message):
    __slots__ = ("batch_id", "items", "answer_each")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    ANSWER_EACH_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    items: _containers.RepeatedCompositeFieldContainer[VerifyItem]
    answer_each: bool
    def __init__(self, batch_id: _Optional[str] = ..., items: _Optional[_Iterable[_Union[VerifyItem, _Mapping]]] = ..., answer_each: _Optional[bool] = ...) -> None: ...

class VerifyResult(_message.Message):
    __slots__ = ("task_index", "rollout_index", "reward", "response_json", "error_kind", "error_message")
    TASK_INDEX_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_KIND_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    task_index: int
    rollout_index: int
    reward: float
    response_json: str
    error_kind: VerifyErrorKind
    error_message: str
    def __init__(self, task_index: _Optional[int] = ..., rollout_index: _Optional[int] = ..., reward: _Optional[float] = ..., response_json: _Optional[str] = ..., error_kind: _Optional[_Union[VerifyErrorKind, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class VerifyStreamResponse(_message.Message):
    __slots__ = ("batch_id", "results", "more", "positions")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    POSITIONS_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    results: _containers.RepeatedCompositeFieldContainer[VerifyResult]
    more: bool
    positions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, batch_id: _Optional[str] = ..., results: _Optional[_Iterable[_Union[VerifyResult, _Mapping]]] = ..., more: _Optional[bool] = ..., positions: _Optional[_Iterable[int]] = ...) -> None: ...

class NumericColumn(_message.Message):
    __slots__ = ("values", "missing", "kind")
    VALUES_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    missing: _containers.RepeatedScalarFieldContainer[int]
    kind: ValueKind
    def __init__(self, values: _Optional[_Iterable[float]] = ..., missing: _Optional[_Iterable[int]] = ..., kind: _Optional[_Union[ValueKind, str]] = ...) -> None: ...

class RolloutBatch(_message.Message):
    __slots__ = ("batch_id", "task_index", "rollout_index", "columns", "masked", "row_json", "error_kind", "shown")
    class ColumnsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: NumericColumn
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[NumericColumn, _Mapping]] = ...) -> None: ...
    class ShownEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ShownColumn
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ShownColumn, _Mapping]] = ...) -> None: ...
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_INDEX_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    MASKED_FIELD_NUMBER: _ClassVar[int]
    ROW_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_KIND_FIELD_NUMBER: _ClassVar[int]
    SHOWN_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    task_index: _containers.RepeatedScalarFieldContainer[int]
    rollout_index: _containers.RepeatedScalarFieldContainer[int]
    columns: _containers.MessageMap[str, NumericColumn]
    masked: _containers.RepeatedScalarFieldContainer[bool]
    row_json: _containers.RepeatedScalarFieldContainer[str]
    error_kind: _containers.RepeatedScalarFieldContainer[VerifyErrorKind]
    shown: _containers.MessageMap[str, ShownColumn]
    def __init__(self, batch_id: _Optional[str] = ..., task_index: _Optional[_Iterable[int]] = ..., rollout_index: _Optional[_Iterable[int]] = ..., columns: _Optional[_Mapping[str, NumericColumn]] = ..., masked: _Optional[_Iterable[bool]] = ..., row_json: _Optional[_Iterable[str]] = ..., error_kind: _Optional[_Iterable[_Union[VerifyErrorKind, str]]] = ..., shown: _Optional[_Mapping[str, ShownColumn]] = ...) -> None: ...

class AggregateOptions(_message.Message):
    __slots__ = ("omit_rollout_infos", "count_errors_as_zero", "omit_samples")
    OMIT_ROLLOUT_INFOS_FIELD_NUMBER: _ClassVar[int]
    COUNT_ERRORS_AS_ZERO_FIELD_NUMBER: _ClassVar[int]
    OMIT_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    omit_rollout_infos: bool
    count_errors_as_zero: bool
    omit_samples: bool
    def __init__(self, omit_rollout_infos: _Optional[bool] = ..., count_errors_as_zero: _Optional[bool] = ..., omit_samples: _Optional[bool] = ...) -> None: ...

class AggregateMetricsHeader(_message.Message):
    __slots__ = ("agent_ref", "options", "expected_rollouts_per_task", "expected_task_indices")
    AGENT_REF_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_ROLLOUTS_PER_TASK_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_TASK_INDICES_FIELD_NUMBER: _ClassVar[int]
    agent_ref: AgentRef
    options: AggregateOptions
    expected_rollouts_per_task: int
    expected_task_indices: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, agent_ref: _Optional[_Union[AgentRef, _Mapping]] = ..., options: _Optional[_Union[AggregateOptions, _Mapping]] = ..., expected_rollouts_per_task: _Optional[int] = ..., expected_task_indices: _Optional[_Iterable[int]] = ...) -> None: ...

class AggregateMetricsRequest(_message.Message):
    __slots__ = ("header", "batch")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    header: AggregateMetricsHeader
    batch: RolloutBatch
    def __init__(self, header: _Optional[_Union[AggregateMetricsHeader, _Mapping]] = ..., batch: _Optional[_Union[RolloutBatch, _Mapping]] = ...) -> None: ...

class DoubleColumn(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, values: _Optional[_Iterable[float]] = ...) -> None: ...

class GroupLevelMetrics(_message.Message):
    __slots__ = ("task_index", "stats", "num_rollouts", "expected_num_rollouts", "missing_num_rollouts", "reward_profile_completion_pct", "sample_json", "custom_json", "rollout_infos")
    class StatsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: DoubleColumn
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[DoubleColumn, _Mapping]] = ...) -> None: ...
    TASK_INDEX_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    NUM_ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_NUM_ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    MISSING_NUM_ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    REWARD_PROFILE_COMPLETION_PCT_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_JSON_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_JSON_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_INFOS_FIELD_NUMBER: _ClassVar[int]
    task_index: _containers.RepeatedScalarFieldContainer[int]
    stats: _containers.MessageMap[str, DoubleColumn]
    num_rollouts: _containers.RepeatedScalarFieldContainer[int]
    expected_num_rollouts: _containers.RepeatedScalarFieldContainer[int]
    missing_num_rollouts: _containers.RepeatedScalarFieldContainer[int]
    reward_profile_completion_pct: _containers.RepeatedScalarFieldContainer[float]
    sample_json: _containers.RepeatedScalarFieldContainer[str]
    custom_json: _containers.RepeatedScalarFieldContainer[str]
    rollout_infos: RolloutInfos
    def __init__(self, task_index: _Optional[_Iterable[int]] = ..., stats: _Optional[_Mapping[str, DoubleColumn]] = ..., num_rollouts: _Optional[_Iterable[int]] = ..., expected_num_rollouts: _Optional[_Iterable[int]] = ..., missing_num_rollouts: _Optional[_Iterable[int]] = ..., reward_profile_completion_pct: _Optional[_Iterable[float]] = ..., sample_json: _Optional[_Iterable[str]] = ..., custom_json: _Optional[_Iterable[str]] = ..., rollout_infos: _Optional[_Union[RolloutInfos, _Mapping]] = ...) -> None: ...

class RolloutInfos(_message.Message):
    __slots__ = ("task_index", "rollout_index", "values", "shown")
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: NumericColumn
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[NumericColumn, _Mapping]] = ...) -> None: ...
    class ShownEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ShownColumn
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ShownColumn, _Mapping]] = ...) -> None: ...
    TASK_INDEX_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    SHOWN_FIELD_NUMBER: _ClassVar[int]
    task_index: _containers.RepeatedScalarFieldContainer[int]
    rollout_index: _containers.RepeatedScalarFieldContainer[int]
    values: _containers.MessageMap[str, NumericColumn]
    shown: _containers.MessageMap[str, ShownColumn]
    def __init__(self, task_index: _Optional[_Iterable[int]] = ..., rollout_index: _Optional[_Iterable[int]] = ..., values: _Optional[_Mapping[str, NumericColumn]] = ..., shown: _Optional[_Mapping[str, ShownColumn]] = ...) -> None: ...

class ShownColumn(_message.Message):
    __slots__ = ("values", "missing", "ints", "json")
    class JsonEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    INTS_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    missing: _containers.RepeatedScalarFieldContainer[int]
    ints: _containers.RepeatedScalarFieldContainer[int]
    json: _containers.ScalarMap[int, str]
    def __init__(self, values: _Optional[_Iterable[float]] = ..., missing: _Optional[_Iterable[int]] = ..., ints: _Optional[_Iterable[int]] = ..., json: _Optional[_Mapping[int, str]] = ...) -> None: ...

class RepeatLevelMetrics(_message.Message):
    __slots__ = ("rollout_index", "sample_count", "missing_count", "stats")
    class StatsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ROLLOUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_COUNT_FIELD_NUMBER: _ClassVar[int]
    MISSING_COUNT_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    rollout_index: int
    sample_count: int
    missing_count: int
    stats: _containers.ScalarMap[str, float]
    def __init__(self, rollout_index: _Optional[int] = ..., sample_count: _Optional[int] = ..., missing_count: _Optional[int] = ..., stats: _Optional[_Mapping[str, float]] = ...) -> None: ...

class Metrics(_message.Message):
    __slots__ = ("agent_ref", "agent_metrics", "agent_metrics_json", "key_metrics", "key_metrics_json", "group_level_metrics", "repeat_level_metrics", "non_finite_counts", "non_numeric_counts")
    class AgentMetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class KeyMetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class NonFiniteCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class NonNumericCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    AGENT_REF_FIELD_NUMBER: _ClassVar[int]
    AGENT_METRICS_FIELD_NUMBER: _ClassVar[int]
    AGENT_METRICS_JSON_FIELD_NUMBER: _ClassVar[int]
    KEY_METRICS_FIELD_NUMBER: _ClassVar[int]
    KEY_METRICS_JSON_FIELD_NUMBER: _ClassVar[int]
    GROUP_LEVEL_METRICS_FIELD_NUMBER: _ClassVar[int]
    REPEAT_LEVEL_METRICS_FIELD_NUMBER: _ClassVar[int]
    NON_FINITE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    NON_NUMERIC_COUNTS_FIELD_NUMBER: _ClassVar[int]
    agent_ref: AgentRef
    agent_metrics: _containers.ScalarMap[str, float]
    agent_metrics_json: str
    key_metrics: _containers.ScalarMap[str, float]
    key_metrics_json: str
    group_level_metrics: GroupLevelMetrics
    repeat_level_metrics: _containers.RepeatedCompositeFieldContainer[RepeatLevelMetrics]
    non_finite_counts: _containers.ScalarMap[str, int]
    non_numeric_counts: _containers.ScalarMap[str, int]
    def __init__(self, agent_ref: _Optional[_Union[AgentRef, _Mapping]] = ..., agent_metrics: _Optional[_Mapping[str, float]] = ..., agent_metrics_json: _Optional[str] = ..., key_metrics: _Optional[_Mapping[str, float]] = ..., key_metrics_json: _Optional[str] = ..., group_level_metrics: _Optional[_Union[GroupLevelMetrics, _Mapping]] = ..., repeat_level_metrics: _Optional[_Iterable[_Union[RepeatLevelMetrics, _Mapping]]] = ..., non_finite_counts: _Optional[_Mapping[str, int]] = ..., non_numeric_counts: _Optional[_Mapping[str, int]] = ...) -> None: ...

class AggregateMetricsResponse(_message.Message):
    __slots__ = ("metrics", "received_rollouts", "duplicate_batches", "last")
    METRICS_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_BATCHES_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    metrics: Metrics
    received_rollouts: int
    duplicate_batches: int
    last: bool
    def __init__(self, metrics: _Optional[_Union[Metrics, _Mapping]] = ..., received_rollouts: _Optional[int] = ..., duplicate_batches: _Optional[int] = ..., last: _Optional[bool] = ...) -> None: ...

class GetServerInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetServerInfoResponse(_message.Message):
    __slots__ = ("name", "version", "metrics", "verify_request_schema_json", "verify_response_schema_json", "wants_rows", "tools", "any_tool_name", "steps", "agent_max_steps", "agent_types", "environment_servers", "agent_model_servers")
    class AgentMaxStepsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class AgentTypesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class EnvironmentServersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: EnvironmentServerInfo
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[EnvironmentServerInfo, _Mapping]] = ...) -> None: ...
    class AgentModelServersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    VERIFY_REQUEST_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    VERIFY_RESPONSE_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    WANTS_ROWS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    ANY_TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    AGENT_MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    AGENT_TYPES_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_SERVERS_FIELD_NUMBER: _ClassVar[int]
    AGENT_MODEL_SERVERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    metrics: _containers.RepeatedScalarFieldContainer[str]
    verify_request_schema_json: str
    verify_response_schema_json: str
    wants_rows: bool
    tools: _containers.RepeatedCompositeFieldContainer[ToolInfo]
    any_tool_name: bool
    steps: bool
    agent_max_steps: _containers.ScalarMap[str, int]
    agent_types: _containers.ScalarMap[str, str]
    environment_servers: _containers.MessageMap[str, EnvironmentServerInfo]
    agent_model_servers: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., metrics: _Optional[_Iterable[str]] = ..., verify_request_schema_json: _Optional[str] = ..., verify_response_schema_json: _Optional[str] = ..., wants_rows: _Optional[bool] = ..., tools: _Optional[_Iterable[_Union[ToolInfo, _Mapping]]] = ..., any_tool_name: _Optional[bool] = ..., steps: _Optional[bool] = ..., agent_max_steps: _Optional[_Mapping[str, int]] = ..., agent_types: _Optional[_Mapping[str, str]] = ..., environment_servers: _Optional[_Mapping[str, EnvironmentServerInfo]] = ..., agent_model_servers: _Optional[_Mapping[str, str]] = ...) -> None: ...

class EnvironmentServerInfo(_message.Message):
    __slots__ = ("name", "type")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: str
    def __init__(self, name: _Optional[str] = ..., type: _Optional[str] = ...) -> None: ...

class ToolInfo(_message.Message):
    __slots__ = ("name", "description", "parameters_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    parameters_json: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters_json: _Optional[str] = ...) -> None: ...

class SeedSessionRequest(_message.Message):
    __slots__ = ("body_json",)
    BODY_JSON_FIELD_NUMBER: _ClassVar[int]
    body_json: str
    def __init__(self, body_json: _Optional[str] = ...) -> None: ...

class SeedSessionResponse(_message.Message):
    __slots__ = ("session_id", "reset_json")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    RESET_JSON_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    reset_json: str
    def __init__(self, session_id: _Optional[str] = ..., reset_json: _Optional[str] = ...) -> None: ...

class StepRequest(_message.Message):
    __slots__ = ("session_id", "response_json")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_JSON_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    response_json: str
    def __init__(self, session_id: _Optional[str] = ..., response_json: _Optional[str] = ...) -> None: ...

class StepResponse(_message.Message):
    __slots__ = ("step_json", "reward", "terminated", "truncated")
    STEP_JSON_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    step_json: str
    reward: float
    terminated: bool
    truncated: bool
    def __init__(self, step_json: _Optional[str] = ..., reward: _Optional[float] = ..., terminated: _Optional[bool] = ..., truncated: _Optional[bool] = ...) -> None: ...

class CallToolRequest(_message.Message):
    __slots__ = ("session_id", "name", "arguments_json")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    name: str
    arguments_json: str
    def __init__(self, session_id: _Optional[str] = ..., name: _Optional[str] = ..., arguments_json: _Optional[str] = ...) -> None: ...

class CallToolResponse(_message.Message):
    __slots__ = ("output", "failed", "status")
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    output: str
    failed: bool
    status: int
    def __init__(self, output: _Optional[str] = ..., failed: _Optional[bool] = ..., status: _Optional[int] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ("closed",)
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    closed: bool
    def __init__(self, closed: _Optional[bool] = ...) -> None: ...

class SessionCallsRequest(_message.Message):
    __slots__ = ("calls",)
    CALLS_FIELD_NUMBER: _ClassVar[int]
    calls: _containers.RepeatedCompositeFieldContainer[SessionCall]
    def __init__(self, calls: _Optional[_Iterable[_Union[SessionCall, _Mapping]]] = ...) -> None: ...

class SessionCall(_message.Message):
    __slots__ = ("id", "seed", "call_tool", "verify", "close", "step")
    ID_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    CALL_TOOL_FIELD_NUMBER: _ClassVar[int]
    VERIFY_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    id: int
    seed: SeedSessionRequest
    call_tool: CallToolRequest
    verify: VerifyRequest
    close: CloseSessionRequest
    step: StepRequest
    def __init__(self, id: _Optional[int] = ..., seed: _Optional[_Union[SeedSessionRequest, _Mapping]] = ..., call_tool: _Optional[_Union[CallToolRequest, _Mapping]] = ..., verify: _Optional[_Union[VerifyRequest, _Mapping]] = ..., close: _Optional[_Union[CloseSessionRequest, _Mapping]] = ..., step: _Optional[_Union[StepRequest, _Mapping]] = ...) -> None: ...

class SessionCallsResponse(_message.Message):
    __slots__ = ("answers",)
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    answers: _containers.RepeatedCompositeFieldContainer[SessionAnswer]
    def __init__(self, answers: _Optional[_Iterable[_Union[SessionAnswer, _Mapping]]] = ...) -> None: ...

class SessionAnswer(_message.Message):
    __slots__ = ("id", "seed", "call_tool", "verify", "close", "error", "step")
    ID_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    CALL_TOOL_FIELD_NUMBER: _ClassVar[int]
    VERIFY_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    id: int
    seed: SeedSessionResponse
    call_tool: CallToolResponse
    verify: VerifyResponse
    close: CloseSessionResponse
    error: CallError
    step: StepResponse
    def __init__(self, id: _Optional[int] = ..., seed: _Optional[_Union[SeedSessionResponse, _Mapping]] = ..., call_tool: _Optional[_Union[CallToolResponse, _Mapping]] = ..., verify: _Optional[_Union[VerifyResponse, _Mapping]] = ..., close: _Optional[_Union[CloseSessionResponse, _Mapping]] = ..., error: _Optional[_Union[CallError, _Mapping]] = ..., step: _Optional[_Union[StepResponse, _Mapping]] = ...) -> None: ...

class CallError(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class ScoreGroupsRequest(_message.Message):
    __slots__ = ("groups", "omit_responses")
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    OMIT_RESPONSES_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[CompletionGroup]
    omit_responses: bool
    def __init__(self, groups: _Optional[_Iterable[_Union[CompletionGroup, _Mapping]]] = ..., omit_responses: _Optional[bool] = ...) -> None: ...

class CompletionGroup(_message.Message):
    __slots__ = ("row_json", "completion_json", "session_id")
    ROW_JSON_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_JSON_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    row_json: str
    completion_json: _containers.RepeatedScalarFieldContainer[str]
    session_id: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, row_json: _Optional[str] = ..., completion_json: _Optional[_Iterable[str]] = ..., session_id: _Optional[_Iterable[str]] = ...) -> None: ...

class ScoreGroupsResponse(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[GroupScores]
    def __init__(self, groups: _Optional[_Iterable[_Union[GroupScores, _Mapping]]] = ...) -> None: ...

class GroupScores(_message.Message):
    __slots__ = ("rewards", "failed", "error_kind", "error_message", "response_json")
    REWARDS_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    ERROR_KIND_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_JSON_FIELD_NUMBER: _ClassVar[int]
    rewards: _containers.RepeatedScalarFieldContainer[float]
    failed: _containers.RepeatedScalarFieldContainer[bool]
    error_kind: _containers.RepeatedScalarFieldContainer[VerifyErrorKind]
    error_message: _containers.RepeatedScalarFieldContainer[str]
    response_json: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, rewards: _Optional[_Iterable[float]] = ..., failed: _Optional[_Iterable[bool]] = ..., error_kind: _Optional[_Iterable[_Union[VerifyErrorKind, str]]] = ..., error_message: _Optional[_Iterable[str]] = ..., response_json: _Optional[_Iterable[str]] = ...) -> None: ...
