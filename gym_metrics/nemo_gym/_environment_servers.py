"""Which NeMo Gym environment server fronts each agent of a config, as NeMo Gym 0.7.0 decides it:
what its collection stamps on every row (`_ng_environment_server`, `_ng_result_type`) and which
protocol the agent's rollouts run under.

- An agent named by an `environment_servers:` block (its `agent_server`, or any field
  referencing a `responses_api_agents` server) is fronted by that block: its name and its
  implementation (`legacy_agent`, the relay to the agent's `/run`; `single_agent_turn_legacy`,
  NeMo Gym's session protocol behind the flat `/run`).
- An agent no block names gets the `legacy_agent` relay NeMo Gym's config migration generates,
  named `relay_name(agent, type)`; a name already taken becomes `<agent>_environment_server`,
  then gets the suffix again until free.
- An agent several blocks name has no one server (NeMo Gym refuses its rows): left out."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, NamedTuple

SUFFIX = "_environment_server"
RELAY_TYPE = "legacy_agent"
SESSION_TYPE = "single_agent_turn_legacy"
"""The environment server that runs NeMo Gym's session protocol behind the flat `/run`: it seeds
the resources session and the agent's, runs one agent turn, verifies, and answers a failure of
any step as a failure row (episode_failure_row) instead of failing the request."""
FAILURE_CLASS = "environment_server_failed"
NO_RESULT_FAILURE_CLASSES = frozenset({"agent_request_failed", "agent_run_error", FAILURE_CLASS})
"""Failure classes of a rollout that did not run: its row holds the failure and the collection's
keys, nothing captured, no request echoed."""


class EnvironmentServer(NamedTuple):
    name: str
    """The block's name: `_ng_environment_server`."""
    type: str
    """Its implementation: `_ng_result_type`."""


def relay_name(agent: str, agent_type: str) -> str:
    """The `legacy_agent` relay NeMo Gym generates for `agent` of type `agent_type`, named after
    its environment: the agent's name less its type, else less `_agent`, then the suffix (165 of
    the 198 relays its environments declare are named so)."""
    stem = agent.removesuffix(f"_{agent_type}").removesuffix(agent_type).rstrip("_")
    if stem == agent:
        stem = agent.removesuffix("_agent").rstrip("_")
    return f"{stem or agent_type}{SUFFIX}"


def _single(block: Any) -> tuple[str, Any] | None:
    """(kind, inner) of a `<kind>: {<impl>: {...}}` block."""
    if isinstance(block, Mapping) and len(block) == 1:
        kind, inner = next(iter(block.items()))
        return str(kind), inner
    return None


def _agents_named(fields: Any) -> list[str]:
    """The agents one environment server's fields reference."""
    named = []
    for field, ref in fields.items() if isinstance(fields, Mapping) else ():
        if isinstance(ref, Mapping) and ref.get("name") is not None:
            if ref.get("type") == "responses_api_agents" or (field == "agent_server" and ref.get("type") is None):
                named.append(str(ref["name"]))
    return named


def _unbound(fields: Mapping[str, Any]) -> bool:
    """An agent whose `resources_server.name` is left unset (`???`): a swap source NeMo Gym
    composes away, fronted by nothing."""
    ref = fields.get("resources_server")
    return isinstance(ref, Mapping) and ref.get("name") == "???"


def environment_servers_of(document: Any) -> dict[str, EnvironmentServer]:
    """Agent block name -> the environment server that fronts it (module docstring)."""
    declared: dict[str, list[EnvironmentServer]] = {}
    agents: dict[str, str] = {}
    for name, block in document.items() if isinstance(document, Mapping) else ():
        kind_inner = _single(block)
        if kind_inner is None or not isinstance(kind_inner[1], Mapping) or len(kind_inner[1]) != 1:
            continue
        kind, inner = kind_inner
        impl, fields = next(iter(inner.items()))
        if kind == "responses_api_agents" and isinstance(fields, Mapping) and fields.get("entrypoint") is not None and not _unbound(fields):
            agents[str(name)] = str(impl)
        elif kind == "environment_servers":
            for agent in _agents_named(fields):
                declared.setdefault(agent, []).append(EnvironmentServer(str(name), str(impl)))
    found = {agent: servers[0] for agent, servers in declared.items() if len(servers) == 1}
    taken = set(map(str, document)) if isinstance(document, Mapping) else set()
    for agent in sorted(set(agents) - set(declared)):
        name = relay_name(agent, agents[agent])
        if name in taken:
            name = f"{agent}{SUFFIX}"
        while name in taken:
            name = f"{name}{SUFFIX}"
        taken.add(name)
        found[agent] = EnvironmentServer(name, RELAY_TYPE)
    return found


_NOT_TASK_DATA = ("agent_ref", "task_source", "skills_ref", "responses_create_params")
"""A flat row's keys that are not its task's data (nor are the collection's `_ng_*` ones)."""


def task_data(row: Mapping[str, Any]) -> dict[str, Any]:
    """The task data `single_agent_turn_legacy` makes of a flat row (its materialized task's
    input less its request): every field but the routing ones and the collection's `_ng_*`."""
    data = {k: v for k, v in row.items() if k not in _NOT_TASK_DATA and not k.startswith("_ng_")}
    nested = data.pop("task_data", None)
    return {**nested, **data} if isinstance(nested, Mapping) else data


def session_seed_body(row: Mapping[str, Any], resources_server: str) -> dict[str, Any]:
    """What `single_agent_turn_legacy` POSTs to the resources server's `/seed_session` for a flat
    row (a ResourcesSeedSessionRequest): a fresh session id, the episode (rollout id, attempt),
    the task (its taskset: the row's `task_source`, else the resources server; its id: the row's
    `task_id`, `problem_id` or `instance_id`, else its task index) and its data. A server whose
    `seed_session` takes the flat row's own fields refuses it, as under NeMo Gym."""
    from gym_metrics.recording import rollout_id_of  # (here: it costs this package's import 0.4 s)

    attempt = row.get("_ng_attempt_index", 0)
    rollout_id = rollout_id_of({**row, "_ng_attempt_index": 0})  # (the episode's base id; its attempt apart)
    task_id = next((str(row[k]) for k in ("task_id", "problem_id", "instance_id") if row.get(k) is not None), str(row.get("_ng_task_index")))
    return {"resources_session_id": f"resources-session-{uuid.uuid4().hex}", "episode_id": {"rollout_id": rollout_id, "attempt": attempt},
            "task_id": {"taskset": row.get("task_source") or resources_server, "task_id": task_id}, "task_data": task_data(row)}  # fmt: skip


def session_verify_body(row: Mapping[str, Any], response: Any) -> dict[str, Any]:
    """What `single_agent_turn_legacy` POSTs to `/verify`: the task data, the request and the
    agent's response (none of the row's routing or `_ng_*` fields)."""
    return {**task_data(row), "responses_create_params": row.get("responses_create_params"), "response": response}


def episode_failure_row(stage: str, message: str, terminal: bool, agent: str, partial_response: Any = None) -> dict[str, Any]:
    """The row `single_agent_turn_legacy` answers for an episode that failed at `stage` (`seed`,
    `agent`, `verification`), as NeMo Gym's writes it: `terminal` when retrying cannot help (a
    request refused), the message cut at 2,000 characters, the agent's response when it had one."""
    row: dict[str, Any] = {"_ng_failure_class": FAILURE_CLASS, "_ng_failure_terminal": terminal, "_ng_failure_message": message[:2000],
                           "_ng_failure_stage": stage, "agent_ref": {"name": agent}}  # fmt: skip
    if partial_response is not None:
        row["_ng_failure_partial_response"] = partial_response
    return row
