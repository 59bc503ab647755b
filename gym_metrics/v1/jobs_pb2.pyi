from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATE_UNSPECIFIED: _ClassVar[JobState]
    JOB_STATE_QUEUED: _ClassVar[JobState]
    JOB_STATE_RUNNING: _ClassVar[JobState]
    JOB_STATE_SUCCEEDED: _ClassVar[JobState]
    JOB_STATE_FAILED: _ClassVar[JobState]
    JOB_STATE_CANCELLED: _ClassVar[JobState]
JOB_STATE_UNSPECIFIED: JobState
JOB_STATE_QUEUED: JobState
JOB_STATE_RUNNING: JobState
JOB_STATE_SUCCEEDED: JobState
JOB_STATE_FAILED: JobState
JOB_STATE_CANCELLED: JobState

class JobSpec(_message.Message):
    __slots__ = ("scorer", "scorer_config_json", "dataset", "run", "target_json", "prompt_template_json", "secrets", "score_names")
    class ScoreNamesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SCORER_FIELD_NUMBER: _ClassVar[int]
    SCORER_CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    TARGET_JSON_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TEMPLATE_JSON_FIELD_NUMBER: _ClassVar[int]
    SECRETS_FIELD_NUMBER: _ClassVar[int]
    SCORE_NAMES_FIELD_NUMBER: _ClassVar[int]
    scorer: str
    scorer_config_json: str
    dataset: Dataset
    run: RunConfig
    target_json: str
    prompt_template_json: str
    secrets: _containers.RepeatedScalarFieldContainer[str]
    score_names: _containers.ScalarMap[str, str]
    def __init__(self, scorer: _Optional[str] = ..., scorer_config_json: _Optional[str] = ..., dataset: _Optional[_Union[Dataset, _Mapping]] = ..., run: _Optional[_Union[RunConfig, _Mapping]] = ..., target_json: _Optional[str] = ..., prompt_template_json: _Optional[str] = ..., secrets: _Optional[_Iterable[str]] = ..., score_names: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Dataset(_message.Message):
    __slots__ = ("rows", "path")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    rows: InlineRows
    path: str
    def __init__(self, rows: _Optional[_Union[InlineRows, _Mapping]] = ..., path: _Optional[str] = ...) -> None: ...

class InlineRows(_message.Message):
    __slots__ = ("rows_json",)
    ROWS_JSON_FIELD_NUMBER: _ClassVar[int]
    rows_json: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, rows_json: _Optional[_Iterable[str]] = ...) -> None: ...

class RunConfig(_message.Message):
    __slots__ = ("parallelism", "limit_samples")
    PARALLELISM_FIELD_NUMBER: _ClassVar[int]
    LIMIT_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    parallelism: int
    limit_samples: int
    def __init__(self, parallelism: _Optional[int] = ..., limit_samples: _Optional[int] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ("job_id", "state", "spec", "rows_done", "rows_failed", "rows_total", "rows_per_second", "error", "created_unix", "updated_unix")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    ROWS_DONE_FIELD_NUMBER: _ClassVar[int]
    ROWS_FAILED_FIELD_NUMBER: _ClassVar[int]
    ROWS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    ROWS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CREATED_UNIX_FIELD_NUMBER: _ClassVar[int]
    UPDATED_UNIX_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    state: JobState
    spec: JobSpec
    rows_done: int
    rows_failed: int
    rows_total: int
    rows_per_second: float
    error: str
    created_unix: float
    updated_unix: float
    def __init__(self, job_id: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., spec: _Optional[_Union[JobSpec, _Mapping]] = ..., rows_done: _Optional[int] = ..., rows_failed: _Optional[int] = ..., rows_total: _Optional[int] = ..., rows_per_second: _Optional[float] = ..., error: _Optional[str] = ..., created_unix: _Optional[float] = ..., updated_unix: _Optional[float] = ...) -> None: ...

class SubmitJobRequest(_message.Message):
    __slots__ = ("spec", "request_id")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    spec: JobSpec
    request_id: str
    def __init__(self, spec: _Optional[_Union[JobSpec, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class SubmitJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: Job
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class GetJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: Job
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("state", "page_size", "page_token")
    STATE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    state: JobState
    page_size: int
    page_token: str
    def __init__(self, state: _Optional[_Union[JobState, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs", "next_page_token")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[Job]
    next_page_token: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class WatchJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: Job
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class GetJobResultRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class GetJobResultResponse(_message.Message):
    __slots__ = ("aggregate_scores_json", "row_scores")
    AGGREGATE_SCORES_JSON_FIELD_NUMBER: _ClassVar[int]
    ROW_SCORES_FIELD_NUMBER: _ClassVar[int]
    aggregate_scores_json: str
    row_scores: RowScores
    def __init__(self, aggregate_scores_json: _Optional[str] = ..., row_scores: _Optional[_Union[RowScores, _Mapping]] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class CancelJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: Job
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class RowScores(_message.Message):
    __slots__ = ("rows_json",)
    ROWS_JSON_FIELD_NUMBER: _ClassVar[int]
    rows_json: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, rows_json: _Optional[_Iterable[str]] = ...) -> None: ...
