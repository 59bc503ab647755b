"""`gym-metrics serve`: an environment over gRPC until SIGTERM."""

from __future__ import annotations

import argparse
import importlib
import json
import os
from pathlib import Path
from typing import Any

from gym_metrics._util.grpc_fork import disable_grpc_fork_handlers
from gym_metrics._util.lifetime import die_with_parent
from gym_metrics._util.limits import IDLE_TTL_S, MAX_SESSIONS, TOOL_TIMEOUT_S, CallLimits
from gym_metrics.cli._base import (
    add_access_flags, grace_seconds, int_in, listen_host, max_local_processes, positive_float, positive_int, reducer_name, server_token,
)  # fmt: skip
from gym_metrics.cli._policy_flags import add_policy_target_flags, policy_config, policy_flags_given
from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError, NotFoundError
from gym_metrics.sandbox import ISOLATION_ENV, ISOLATIONS, OPTIONS_ENV, PROVIDER_ENV, PROVIDERS, check_options



ORDER = 10  # its place in `gym-metrics --help` (cli/_discovery.py)
LABEL_FIELD = "expected_answer"
"""The verify request field OpenRLHF's labels fill when --http-label-field is not given."""
MAX_MESSAGE_MB = 2047
"""The largest gRPC message size: gRPC holds it in a signed 32-bit int (2 GiB less a byte)."""


def _message_mb(text: str) -> float:
    """--max-message-mb: MiB, above 0 and at most MAX_MESSAGE_MB (nan and inf refused)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")  # refused below, saying what is wanted
    if not 0 < value <= MAX_MESSAGE_MB:
        raise argparse.ArgumentTypeError(f"must be a number of MiB above 0 and at most {MAX_MESSAGE_MB} (gRPC's limit), got {text}")
    return value


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("serve", help="serve an environment over gRPC")
    p.add_argument(
        "target",
        help="registered name (e.g. math_exact), module:Class, path/app.py:Class (an OpenEnv Environment "
        "class too: docs/environments.md#openenv), or a NeMo Gym config "
        "(resources_servers/<env>/configs/<name>.yaml; its environment ported: docs/nemo-gym.md)",
    )  # fmt: skip
    p.add_argument(
        "--openenv-action", metavar="MODULE:CLASS",
        help="an OpenEnv environment's Action class, when its step() does not name it (docs/environments.md#openenv)",
    )  # fmt: skip
    p.add_argument("--host", default="127.0.0.1", type=listen_host, help="the address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=50051, help="0 picks a free port (printed on stderr)")
    most = max_local_processes()
    p.add_argument(
        "--workers", type=int_in(1, most, f" (4 per core of this machine's {os.cpu_count() or 1}, at least 8)"), default=1,
        help=f"processes sharing the port (SO_REUSEPORT; at most 4 a core, at least 8: {most} here)",
    )  # fmt: skip
    add_access_flags(p)
    p.add_argument("--max-message-mb", type=_message_mb, default=64.0, help=f"max gRPC message size (MiB; at most {MAX_MESSAGE_MB})")
    p.add_argument("--grace", type=grace_seconds, default=10.0, help="seconds in-flight calls get on SIGTERM (0..3600)")
    p.add_argument(
        "--prometheus-port", type=int, metavar="P",
        help="serve Prometheus metrics (/metrics) on this port of --host, 0 picks one (needs the prometheus extra; "
        "with --workers the parent serves the sum over workers)",
    )  # fmt: skip
    _add_limit_flags(p)
    tools = p.add_argument_group("sessions and tools (agentic environments)")
    tools.add_argument("--max-sessions", type=positive_int, default=MAX_SESSIONS, help="live sessions at most (default %(default)s)")
    tools.add_argument(
        "--session-ttl", type=positive_float, default=IDLE_TTL_S, metavar="S",
        help="seconds a session may go unused before it is closed (default %(default)s)",
    )  # fmt: skip
    tools.add_argument("--tool-timeout", type=positive_float, default=TOOL_TIMEOUT_S, metavar="S", help="seconds one tool call may run (default %(default)s)")
    tools.add_argument(
        "--verify-timeout", type=positive_float, metavar="S",
        help="seconds one verify may run; past it the rollout fails as `timeout` (default: no bound, as NeMo Gym)",
    )  # fmt: skip
    tools.add_argument(
        "--mcp-port", type=int, metavar="P",
        help="also serve the tools over MCP (streamable HTTP, http://HOST:P/mcp; 0 picks a port; the mcp extra; one worker)",
    )  # fmt: skip
    sandbox = p.add_argument_group("the sandbox for model-written code (docs/sandbox.md)")
    sandbox.add_argument(
        "--sandbox-isolation", choices=ISOLATIONS, metavar="{" + ",".join(ISOLATIONS) + "}",
        help="strict (default): namespaces, a user and a tmpfs per run, or the server refuses to start; "
        "none: model code runs with the server's reach (a warning at start, results say isolated: false)",
    )  # fmt: skip
    sandbox.add_argument(
        "--sandbox-provider", metavar="NAME",
        help="what runs the programs: local (default: launchers on this host), docker, or a plugin's name",
    )  # fmt: skip
    sandbox.add_argument(
        "--sandbox-option", action="append", default=[], metavar="KEY=VALUE",
        help="an option of the provider (its constructor's keyword; the value read as JSON, else text), e.g. image=python:3.12-slim; repeatable",
    )  # fmt: skip
    rl = p.add_argument_group("rewards over HTTP, for trainers without gRPC (OpenRLHF)")
    rl.add_argument("--http-port", type=int, metavar="P", help="POST /get_reward (OpenRLHF) and /score_groups on this port (0 picks one; the http extra)")
    rl.add_argument("--http-label-field", metavar="NAME", help=f"with --http-port: the verify request field OpenRLHF's labels fill (default {LABEL_FIELD})")
    agent = p.add_argument_group("NeMo Gym's agent POST /run, for NeMo RL (docs/training.md#nemo-rl-run)")
    agent.add_argument(
        "--agent-http-port", type=int, metavar="P",
        help="serve POST /run on this port: each task row run as an episode of the policy and verified (0 picks one; the http extra)",
    )  # fmt: skip
    add_policy_target_flags(agent)
    agent.add_argument("--max-steps", type=positive_int, metavar="N", help="policy calls one /run episode may make (default: no limit)")
    agent.add_argument(
        "--capture-tokens", action="store_true",
        help="/run asks the policy (vLLM chat) for token IDs and log-probs and answers them, with ng_trajectory",
    )  # fmt: skip
    nemo = p.add_argument_group("NeMo Gym environments (a config YAML target, or --config)")
    nemo.add_argument("--config", type=Path, metavar="FILE.yaml", help="the NeMo Gym config of a path/app.py:Class target")
    nemo.add_argument("--name", metavar="BLOCK", help="the resources server block to serve, when the config holds several")
    nemo.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="set a config field (the value read as YAML); repeatable")
    nemo.add_argument(
        "--dump-config", action="store_true",
        help="print the config as it would be served (composed, resolved, --set applied, secret-shaped values masked: "
        "NeMo Gym's gym env resolve) and exit",
    )  # fmt: skip
    nemo.add_argument(
        "--server", action="append", default=[], metavar="NAME=URL|TARGET.json",
        help="a model server the config names (e.g. its judge_model_server): its base URL, or a model "
        "target file (model name, api, api_key_env; as evaluate --target-config takes); repeatable",
    )  # fmt: skip
    p.add_argument(
        "--reducers", "--metrics", dest="reducers", nargs="+", metavar="NAME", type=reducer_name,
        help="reward reducers to report, e.g. pass@1 pass@8 (k at most 100,000; replaces the env's; --metrics is the old spelling)",
    )  # fmt: skip
    p.set_defaults(func=run, check_inputs=_check_flags)


def _check_flags(ns: argparse.Namespace) -> None:
    """Flags that act only with another, refused before anything is loaded (each did nothing, silently)."""
    if ns.agent_http_port is None:
        given = [*policy_flags_given(ns), *(["--max-steps"] if ns.max_steps is not None else []), *(["--capture-tokens"] if ns.capture_tokens else [])]
        if given:
            raise InvalidInputError(f"{', '.join(given)}: the /run door's flags go with --agent-http-port", [FieldViolation("--agent-http-port", "not given")])
    if ns.http_label_field is not None and ns.http_port is None:
        raise InvalidInputError("--http-label-field names the field of --http-port's labels", [FieldViolation("--http-port", "not given")])
    if ns.openenv_action is not None and _config_of(ns) is not None:
        raise InvalidInputError("--openenv-action is for an OpenEnv environment, not a NeMo Gym config's",
                                [FieldViolation("--openenv-action", "not with a config YAML target or --config")])  # fmt: skip


def _config_of(ns: argparse.Namespace) -> Any:
    """The NeMo Gym config served: --config, else a config YAML target (None: neither)."""
    target = str(ns.target)
    return ns.config or (Path(target) if target.endswith((".yaml", ".yml")) else None)


def _agent_target(ns: argparse.Namespace) -> Any:
    """The /run door's policy (None without --agent-http-port; its flags need it: _check_flags)."""
    target = policy_config(ns)
    if ns.agent_http_port is None:
        return None
    if target is None:
        raise InvalidInputError("--agent-http-port needs a policy", [FieldViolation("--policy-url", "not given")])
    return target


def _choose_sandbox_provider(name: str | None, options: list[str]) -> None:
    """For every environment's `sandbox()` in this server and its workers (environment
    variables: the workers inherit them); an unknown name or a bad option fails here, whether
    or not the environment uses the sandbox."""
    if name is not None:
        try:
            PROVIDERS.get(name)
        except NotFoundError as exc:  # naming the known ones
            raise NotFoundError(f"--sandbox-provider: {exc}") from None
        os.environ[PROVIDER_ENV] = name
    if options:
        values: dict[str, Any] = {}
        for i, item in enumerate(options):
            key, eq, text = item.partition("=")
            if not eq or not key.strip():
                raise InvalidInputError(f"--sandbox-option {item!r} (option {i + 1}): expected KEY=VALUE")
            try:
                values[key.strip()] = json.loads(text)
            except json.JSONDecodeError:
                values[key.strip()] = text
        try:
            check_options(None, values)  # the provider chosen above, or by the environment
        except GymMetricsError as exc:
            raise InvalidInputError(f"--sandbox-option: {exc}") from None
        os.environ[OPTIONS_ENV] = json.dumps(values)


def _add_limit_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per CallLimits field; a call past one is refused with RESOURCE_EXHAUSTED."""
    default = CallLimits()
    for name, kind, what in (
        ("max_rollouts_per_call", positive_int, "rollouts one AggregateMetrics call may send"),
        ("max_tasks_per_call", positive_int, "distinct tasks one AggregateMetrics call may name"),
        ("max_concurrent_aggregations", positive_int, "AggregateMetrics calls running at once"),
        ("max_call_mb", positive_float, "MiB one AggregateMetrics call may send"),
        ("max_rows_per_batch", positive_int, "rollouts one batch message of an AggregateMetrics call may carry"),
    ):
        parser.add_argument("--" + name.replace("_", "-"), type=kind, default=getattr(default, name),
                            help=f"{what} (default %(default)s)")  # fmt: skip


def run(ns: argparse.Namespace) -> int:
    # Before anything imports grpc (the environment's own file included): a child forked
    # inside verify must not inherit grpc's fork handlers (see gym_metrics._util.grpc_fork).
    disable_grpc_fork_handlers()
    die_with_parent()  # when a run started this server for itself (collect --benchmark): it goes with that run
    from gym_metrics._transport.server import ServerConfig, leave_stuck_threads, serve

    if ns.dump_config:
        return _dump_config(ns)
    if ns.sandbox_isolation is not None:  # for every Pool this server and its workers make
        os.environ[ISOLATION_ENV] = ns.sandbox_isolation
    _choose_sandbox_provider(ns.sandbox_provider, ns.sandbox_option)

    for flag in ("tls_cert", "tls_key"):  # read after a NeMo Gym config's server moved into its folder
        if getattr(ns, flag):
            setattr(ns, flag, os.path.abspath(getattr(ns, flag)))
    env = _environment(ns)  # fail fast with a clear message, before binding
    token = server_token(ns)
    if bool(ns.tls_cert) != bool(ns.tls_key):
        raise GymMetricsError("--tls-cert and --tls-key go together")
    limits = {name: getattr(ns, name) for name in CallLimits.__dataclass_fields__}
    config = ServerConfig(
        host=ns.host,
        port=ns.port,
        max_message_bytes=int(ns.max_message_mb * 1024 * 1024),
        auth_token=token,
        tls_cert_file=ns.tls_cert,
        tls_key_file=ns.tls_key,
        grace_seconds=ns.grace,
        limits=CallLimits(**limits),
        prometheus_port=ns.prometheus_port,
        max_sessions=ns.max_sessions,
        session_ttl_s=ns.session_ttl,
        tool_timeout_s=ns.tool_timeout,
        verify_timeout_s=ns.verify_timeout,
        mcp_port=ns.mcp_port,
        http_port=ns.http_port,
        http_label_field=ns.http_label_field or LABEL_FIELD,
        agent_http_port=ns.agent_http_port,
        agent_target=_agent_target(ns),
        agent_max_steps=ns.max_steps,
        agent_capture_tokens=ns.capture_tokens,
    )
    if ns.mcp_port is not None and ns.workers > 1:
        raise InvalidInputError("--mcp-port serves one process's sessions", [FieldViolation("--workers", "use --workers 1 with --mcp-port")])
    for flag, port in (("--http-port", ns.http_port), ("--agent-http-port", ns.agent_http_port)):
        if port is not None and ns.workers > 1:
            raise InvalidInputError(f"{flag} is served by one process", [FieldViolation("--workers", f"use --workers 1 with {flag}")])
    serve(env, config, workers=ns.workers, reducers=ns.reducers)
    leave_stuck_threads(min(config.grace_seconds, 2.0))  # (the command's process only: a library caller's threads are its own)
    return 0


def _dump_config(ns: argparse.Namespace) -> int:
    from gym_metrics.nemo_gym import dump_config

    target = str(ns.target)
    config = ns.config or (Path(target) if target.endswith((".yaml", ".yml")) else None)
    if config is None:
        raise InvalidInputError("--dump-config prints a NeMo Gym config", [FieldViolation("--dump-config", "give a config YAML target, or --config")])
    print(dump_config(config, ns.name, ns.set), end="")
    return 0


def _environment(ns: argparse.Namespace) -> Any:
    """The environment class of a name or module path, or the NeMo Gym server a config builds."""
    target = str(ns.target)
    config = ns.config or (Path(target) if target.endswith((".yaml", ".yml")) else None)
    if config is None:
        if ns.set or ns.server or ns.name:
            raise InvalidInputError("NeMo Gym flags without a config", [FieldViolation("--config", "--set, --server and --name need a config YAML")])
        from gym_metrics.ecosystems.openenv import adapt, is_openenv_environment, openenv_server
        from gym_metrics.environments import resolve_server

        if ns.openenv_action is None:
            return resolve_server(target, adapt=adapt)
        action = _attribute(ns.openenv_action, "--openenv-action")
        found = resolve_server(target, adapt=lambda obj: openenv_server(obj, action) if isinstance(obj, type) and is_openenv_environment(obj) else None)
        if getattr(found, "environment", None) is None:
            raise InvalidInputError("--openenv-action is for an OpenEnv environment", [FieldViolation("--openenv-action", f"{target} is not one")])
        return found
    from gym_metrics.environments import resolve_server
    from gym_metrics.nemo_gym import load_config_server

    servers = dict(_model_server(*_pair(item, "--server")) for item in ns.server)
    server_class = None if target.endswith((".yaml", ".yml")) else resolve_server(target)
    return load_config_server(  # run in the environment's folder, as NeMo Gym's launcher runs it
        Path(config).resolve(), name=ns.name, overrides=ns.set, servers=servers, host=ns.host, port=ns.port,
        server_class=server_class, in_folder=True,
    )  # fmt: skip


def _attribute(value: str, flag: str) -> Any:
    """What `module:Name` names; InvalidInputError naming `flag` when it does not load."""
    module, _, name = value.rpartition(":")
    if not module or not name:
        raise InvalidInputError(f"cannot load {value}", [FieldViolation(flag, "expected MODULE:NAME")])
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise InvalidInputError(f"cannot load {value}", [FieldViolation(flag, str(exc))]) from None


def _model_server(name: str, value: str) -> tuple[str, Any]:
    """(name, base URL or model target config) of one --server."""
    if value.endswith(".json"):
        from gym_metrics.targets import ModelTargetConfig, load_target

        target = load_target(value)
        if not isinstance(target, ModelTargetConfig):
            raise InvalidInputError("bad --server", [FieldViolation(f"--server {name}", f"{value} is an agent target; a model server needs type model")])
        return name, target
    if not value.startswith(("http://", "https://")):
        raise InvalidInputError("bad --server", [FieldViolation(f"--server {name}", f"{value!r}: expected an http(s) URL or a TARGET.json file")])
    return name, value


def _pair(item: str, flag: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key or not value:
        raise InvalidInputError(f"bad {flag}", [FieldViolation(flag, f"{item!r}: expected NAME=URL")])
    return key, value
