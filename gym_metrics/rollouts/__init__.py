"""The rollout-row vocabulary: JSONL rollout rows read into columns (one batch per agent),
their keys (`_ng_task_index`, `_ng_rollout_index`), typed values and shown values, and the fast
reader's pieces the collector reuses. The aggregation engine, the collector and compare all
speak it; it knows nothing of metrics."""

from gym_metrics.rollouts._arrow import (
    agent_codes,
    arrow_numeric_field,
    columns_from_table,
    parse_lines,
)
from gym_metrics.rollouts._columns import (
    RolloutColumns,
    concat,
    merge_kinds,
    take_non_numeric,
)
from gym_metrics.rollouts._reader import (
    BOM,
    BadLine,
    OnBadLine,
    RolloutFile,
    agent_name,
    agent_problem,
    byte_ranges,
    count_lines,
    line_bounds,
    read_chunks,
    read_rollouts,
)
from gym_metrics.rollouts._rowsource import (
    BufferRows,
    RowParseError,
    RowSource,
    bad_json_reason,
    parse_row,
)
from gym_metrics.rollouts._shown import (
    ShownField,
    concat_shown,
    take_shown,
)
from gym_metrics.rollouts._values import (
    ERROR_KEY,
    ERROR_KINDS,
    MAX_INDEX,
    ROLLOUT_KEY,
    ROLLOUT_KEY_ALIASES,
    TASK_KEY,
    TASK_KEY_ALIASES,
    NumericField,
    ValueKind,
    minimal_row,
    row_index_value,
    shown_of_field,
)

__all__ = [
    "BOM",
    "MAX_INDEX",
    "BadLine",
    "BufferRows",
    "ERROR_KEY",
    "ERROR_KINDS",
    "NumericField",
    "OnBadLine",
    "ROLLOUT_KEY",
    "ROLLOUT_KEY_ALIASES",
    "RolloutColumns",
    "RolloutFile",
    "RowParseError",
    "RowSource",
    "ShownField",
    "TASK_KEY",
    "TASK_KEY_ALIASES",
    "ValueKind",
    "agent_codes",
    "agent_name",
    "agent_problem",
    "arrow_numeric_field",
    "bad_json_reason",
    "byte_ranges",
    "columns_from_table",
    "concat",
    "concat_shown",
    "count_lines",
    "line_bounds",
    "merge_kinds",
    "minimal_row",
    "parse_lines",
    "parse_row",
    "read_chunks",
    "read_rollouts",
    "row_index_value",
    "shown_of_field",
    "take_non_numeric",
    "take_shown",
]
