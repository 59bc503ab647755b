"""The output row of a verified rollout: what NeMo Gym 0.7.0's collection writes, or (with
`collect --keep-input-fields`) the whole input row under the verify response."""

from __future__ import annotations

from typing import Any

import orjson

from gym_metrics.collector._keys import may_hold_key
from gym_metrics.nemo_gym import NO_RESULT_FAILURE_CLASSES, EnvironmentServer
from gym_metrics.rollouts import ROLLOUT_KEY, TASK_KEY, parse_row
from gym_metrics._util.jsonio import dumps_finite

CARRIED_KEYS = (TASK_KEY, ROLLOUT_KEY, "agent_ref", "task_source", "skills_ref", "_ng_attempt_index", "_ng_rollout_id")
"""The input row's keys NeMo Gym 0.7.0's collection copies onto the verify response it writes
(`nemo_gym/rollout_collection.py`), when the row has them."""
ENVIRONMENT_SERVER_KEY = "_ng_environment_server"
RESULT_TYPE_KEY = "_ng_result_type"
"""What NeMo Gym 0.7.0's collection stamps on every row it writes: the environment server the
rollout ran through and that server's type (`legacy_agent`: the relay to an agent, which every
environment it ships but two has; gym_metrics.nemo_gym.environment_servers_of)."""
REQUEST_KEYS = ("responses_create_params", "response")
"""Taken from the request when the verify response lacks them (NeMo Gym's response model
always has both: its environments echo the request)."""


def written_row(
    request: dict[str, Any], response: dict[str, Any], environment_server: EnvironmentServer, keep_input_fields: bool = False
) -> dict[str, Any]:
    """The output row of a verified rollout, as NeMo Gym's collection writes it: the verify
    response, the request's `responses_create_params` and `response` where it has none, the
    collector's keys (indices, agent_ref, ...), then the environment server (the row's own
    `_ng_environment_server`, else `environment_server`'s name) and its type. Other input columns (a
    dataset's `id`) are not written, so they are not aggregated either. `keep_input_fields`
    (`collect --keep-input-fields`, what 0.1.0 always wrote, without these stamps): the whole
    input row under the response's fields."""
    if keep_input_fields:
        return {**request, **response}
    row = dict(response)
    for key in REQUEST_KEYS if row.get("_ng_failure_class") not in NO_RESULT_FAILURE_CLASSES else ():  # (a rollout that did not run echoes nothing)
        if key not in row and key in request:
            row[key] = request[key]
    for key in CARRIED_KEYS:
        if key in request:
            row[key] = request[key]
    given = request.get(ENVIRONMENT_SERVER_KEY)
    row[ENVIRONMENT_SERVER_KEY] = given if isinstance(given, str) else environment_server.name
    row[RESULT_TYPE_KEY] = environment_server.type
    return row


def agent_ref_suffix(agent: str) -> bytes:
    """What `with_agent_ref` appends for `agent`."""
    return b'"agent_ref":' + orjson.dumps({"name": agent})


def with_agent_ref(line: bytes, agent: str) -> bytes:
    """A JSON object line that names no agent, with agent_ref.name `agent` (as NeMo Gym's
    collection stamps the rows it routes by `+agent_name`). A line with no agent_ref key keeps
    its bytes, the key appended last (where NeMo Gym adds it); one whose agent_ref is null or
    has no name is written again from its row, the ref's other fields kept."""
    if not may_hold_key(line, b"agent_ref"):
        head = line.rstrip()[:-1].rstrip()  # the object without its closing brace
        return head + (b"" if head.endswith(b"{") else b",") + agent_ref_suffix(agent) + b"}"
    row = parse_row(line)
    ref = row.get("agent_ref")
    row["agent_ref"] = {**(ref if isinstance(ref, dict) else {}), "name": agent}
    return dumps_finite(row)
