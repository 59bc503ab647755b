"""`gym-metrics collect` (rollouts through a server, then their metrics) and `gym-metrics demo`."""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gym_metrics._util.memory import fewer_gc_passes
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.cli._base import (
    agent_name,
    max_local_processes,
    non_negative_int,
    positive_float,
    positive_int,
    read_token,
    require_module,
    server_address,
    warn_bad_lines,
)
from gym_metrics.cli._export import add_export_flags, add_pushgateway_flag, export_after
from gym_metrics.cli._health import health_after
from gym_metrics.cli._collect_report import report, run_keeping_result
from gym_metrics.cli._collect_rows import fan_out_map, repeats_entry, rows
from gym_metrics.cli._demo import run_demo
from gym_metrics.cli._policy_flags import GENERATION_ONLY, add_policy_flags, policy_config
from gym_metrics.cli._report import add_report_flag, report_after


ORDER = 20  # its place in `gym-metrics --help` (cli/_discovery.py)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("collect", help="verify rollouts through a server, then aggregate per agent")
    p.add_argument(
        "--server", action="append", metavar="[AGENT=]HOST:PORT", type=_server_entry,
        help="the resources server; repeat it for replicas (batches are spread over them), "
        "or dns:///NAME:PORT for every address of a name (round_robin, a headless Service); "
        "AGENT=HOST:PORT: that agent's own server (several environments in one run, each collected "
        "in a process of its own, as NeMo Gym routes an agent to its resources server); "
        "with --benchmark and no --server, its environments are served for the run",
    )  # fmt: skip
    p.add_argument("--input", type=Path, help="JSONL: one task or rollout per line, with agent_ref.name (required, but with --reverify-failed or --benchmark)")
    p.add_argument("--output", required=True, type=Path, help="verified rollouts JSONL (appended as they complete)")
    p.add_argument(
        "--num-repeats", action="append", type=repeats_entry, metavar="K|AGENT=K",
        help="K rollouts of each line (rollout indices counted per task, as NeMo Gym); AGENT=K entries give an agent's "
        "(the agent a row runs with, else the agent_ref.name or task_source it came with; K alone or _default=K for the rest)",
    )  # fmt: skip
    p.add_argument("--agent", metavar="NAME", type=agent_name, help="the agent of lines without an agent_ref")
    p.add_argument(
        "--agent-map", action="append", default=[], metavar="KEY=AGENT",
        help="re-route the rows whose agent_ref.name (or task_source) is KEY to AGENT, every row with _default=AGENT "
        "(NeMo Gym's agent_map; its 0.7.0 +agent_name=X is --agent-map _default=X)",
    )  # fmt: skip
    p.add_argument(
        "--fan-out", action="append", default=[], metavar="KEY=AGENT,AGENT",
        help="run each row whose agent_ref.name (or task_source) is KEY once per agent listed, its repeats each, one task "
        "(NeMo Gym's fan_out: agents side by side for compare)",
    )  # fmt: skip
    p.add_argument(
        "--interleave-repeats", action="store_true",
        help="start the repeats round by round (abcabc, not aabbcc: NeMo Gym's interleave_repeats), spreading a heavy "
        "task's rollouts over the run; the input is read once a round",
    )  # fmt: skip
    p.add_argument(
        "--limit", type=positive_int, metavar="N",
        help="the input's first N lines only (NeMo Gym's +limit; with --benchmark, its first N rollouts, as gym eval run counts)",
    )  # fmt: skip
    p.add_argument(
        "--prompt-config", metavar="FILE.yaml",
        help="NeMo Gym's prompt template (`user`, optional `system`, with {field} placeholders): each row's "
        "responses_create_params.input is built from it and the row's fields (a row that has an input is a bad line)",
    )  # fmt: skip
    p.add_argument(
        "--benchmark", metavar="NAME|CONFIG.yaml",
        help="a NeMo Gym benchmark (`gym eval run --benchmark`): its dataset, prompt template, repeats and agent from "
        "its config (NAME: benchmarks/NAME/config.yaml here; several in it: an eval suite, each on its own server); "
        "--input, --prompt-config, --num-repeats override them",
    )  # fmt: skip
    p.add_argument(
        "--split", choices=("benchmark", "train", "validation"), default="benchmark",
        help="with --benchmark CONFIG.yaml: run its datasets of this type (NeMo Gym's gym eval run ++split=; default benchmark)",
    )  # fmt: skip
    p.add_argument(
        "--agent-code", metavar="CONFIG.yaml",
        help="run the rows of this NeMo Gym config's own agents (responses_api_agents/<agent> of its tree, ported) by "
        "their code, as NeMo Gym runs them (--benchmark CONFIG.yaml gives it already): docs/nemo-gym.md#agents",
    )  # fmt: skip
    p.add_argument(
        "--resume", action="store_true",
        help="continue an interrupted run: skip rollouts already in --output, run those of its failures sidecar again "
        "(NeMo Gym's rule: not a terminal one, at most --max-rollout-attempts attempts)",
    )  # fmt: skip
    p.add_argument(
        "--max-rollout-attempts", type=positive_int, metavar="N",
        help="with --resume: attempts of a rollout over resumed runs, its failed ones in the failures sidecar "
        "(default: NEMO_GYM_MAX_ROLLOUT_ATTEMPTS, else 3)",
    )  # fmt: skip
    p.add_argument(
        "--processes", type=positive_int, default=1, metavar="N",
        help="shard the rollouts over N collector processes on this machine (by task), then merge and aggregate once: "
        "docs/pipelines.md#processes",
    )  # fmt: skip
    p.add_argument(
        "--ray", nargs="?", const="", metavar="ADDRESS",
        help="run the shards as Ray tasks across a cluster (default: a local Ray; --processes N of them, else one per "
        "cluster CPU), the output written here: docs/pipelines.md#processes; needs gym-metrics[ray]",
    )  # fmt: skip
    p.add_argument("--shard", help=argparse.SUPPRESS)  # one process of --processes N (I/N): collects its part, no aggregation
    p.add_argument("--on-bad-line", choices=["fail", "skip"], default="fail", help="stop or skip (and report)")
    p.add_argument("--count-errors-as-zero", action="store_true", help="a failed verify counts as reward 0")
    p.add_argument(
        "--count-failure-classes-as-zero", nargs="+", default=[], metavar="CLASS",
        help="score the failures sidecar's rollouts of these classes (judge_failed, ...) 0 in the metrics, the files unchanged "
        "(NeMo Gym's count_failure_classes_as_zero)",
    )  # fmt: skip
    p.add_argument("--no-rollout-infos", action="store_true", help="omit per-rollout entries in the metrics")
    p.add_argument(
        "--keep-input-fields", action="store_true",
        help="write each verified rollout as its whole input row plus the verify response (every input column "
        "is then aggregated too); default: the verify response and the collector's keys, as NeMo Gym writes",
    )  # fmt: skip
    p.add_argument("--batch-size", type=positive_int, default=256, help="rollouts per VerifyStream batch")
    p.add_argument("--max-in-flight", type=positive_int, default=8, help="batches' worth of rollouts unanswered at most (x --batch-size)")
    p.add_argument(
        "--connections", type=positive_int, metavar="N",
        help="TCP connections per server to spread verify batches over (default: one per server worker process; "
        f"at most a quarter of the open-file limit, ulimit -n, and {MAX_CONNECTIONS:,})",
    )  # fmt: skip
    p.add_argument("--max-retries", type=non_negative_int, default=8, help="retries when the server is unavailable")
    p.add_argument(
        "--connect-timeout", type=positive_float, default=5.0, metavar="S",
        help="seconds the first connection may take; past it exit 4 (default 5)",
    )  # fmt: skip
    p.add_argument("--auth-token-env", metavar="VAR", help="send `authorization: Bearer $VAR`")
    p.add_argument("--tls-ca", type=Path, help="PEM root certificate: connect with TLS")
    p.add_argument(
        "--reverify-failed", action="store_true",
        help="verify again only the rows of --output's failures sidecar (OUTPUT_failures.jsonl, e.g. a judge that failed), "
        "append the recovered ones to --output and aggregate again (NeMo Gym's reverify --judge-failed-only)",
    )  # fmt: skip
    p.add_argument(
        "--reverify", action="store_true",
        help="verify rows that already carry a reward again, keeping the stored reward beside the new one (_gm_stored_reward)",
    )  # fmt: skip
    add_policy_flags(p)
    p.set_defaults(func=run, check_inputs=_check_inputs)
    add_export_flags(p)
    add_pushgateway_flag(p)
    add_report_flag(p)

    demo = sub.add_parser("demo", help="serve math_exact in-process and collect its shipped sample")
    demo.add_argument("--out-dir", type=Path, default=Path("demo_out"))
    mode = demo.add_mutually_exclusive_group()
    mode.add_argument(
        "--online", action="store_true",
        help="generate the sample's answers first, with a scripted policy model on loopback",
    )  # fmt: skip
    mode.add_argument(
        "--agent", action="store_true",
        help="the agent loop instead: serve the inventory tool environment and run its sample as multi-turn episodes of a scripted policy",
    )  # fmt: skip
    mode.add_argument("--reasoning-gym", action="store_true", help="a mix of reasoning-gym's tasks answered by a scripted policy (its extra)")
    demo.set_defaults(func=run_demo)


def _server_entry(text: str) -> str:
    """One `--server` value: HOST:PORT, or AGENT=HOST:PORT (the address checked either way)."""
    from gym_metrics.collector import split_server

    agent, address = split_server(text)
    server_address(address)
    return text if agent is None else f"{agent_name(agent)}={address}"


RAY_MAX_PROCESSES = 4096
MAX_CONNECTIONS = 1024
"""The most --connections to one server (a server's workers take one each)."""


def max_processes(ray: bool) -> int:
    """The most shards a run may ask for: 4 a core here (the agent loop keeps a core busy; more
    only add memory), at least 8; a Ray run's are spread over its cluster."""
    return RAY_MAX_PROCESSES if ray else max_local_processes()


def max_connections() -> int:
    """The most --connections: a quarter of this process's open-file limit (a connection holds
    a socket and gRPC's own descriptors; the input, output and sidecars need theirs), at least
    8, at most MAX_CONNECTIONS."""
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return MAX_CONNECTIONS if soft == resource.RLIM_INFINITY else max(8, min(MAX_CONNECTIONS, soft // 4))


def _check_inputs(ns: argparse.Namespace) -> None:
    """Bad policy flags are refused before any connection; so is a --server given twice."""
    from gym_metrics.collector import split_server
    from gym_metrics.errors import FieldViolation, InvalidInputError

    if not ns.server:
        if ns.benchmark is None:
            raise InvalidInputError("no server", [FieldViolation("--server", "give HOST:PORT (or --benchmark, whose environment collect serves)")])
        if ns.ray is not None:
            raise InvalidInputError("Ray's nodes must reach the server", [FieldViolation("--server", "give the benchmark's server's address with --ray")])
    ns.server = ns.server or []
    twice = sorted({s for s in ns.server if ns.server.count(s) > 1})
    if twice:
        raise InvalidInputError("each --server once (a replica listed twice would get twice the batches)",
                                [FieldViolation("--server", f"{s} given twice") for s in twice])  # fmt: skip
    if ns.policy_url is None:
        given = [flag for flag in GENERATION_ONLY if getattr(ns, flag[2:].replace("-", "_")) not in (None, False)]
        given += ["--no-agent-loop"] if ns.agent_loop is False else []  # (one policy call per row: of no policy, nothing)
        if given:
            raise InvalidInputError(f"{', '.join(given)} need --policy-url", [FieldViolation("--policy-url", "not given")])
    most = max_processes(ns.ray is not None)
    if ns.processes > most:
        where = "a Ray run's shards" if ns.ray is not None else f"processes on this machine's {os.cpu_count() or 1} cores"
        raise InvalidInputError("too many processes", [FieldViolation("--processes", f"{ns.processes:,} is more than {most:,} {where} "
                                                                      "(each holds about 100 MB and its own connections)")])  # fmt: skip
    if ns.connections is not None and ns.connections > (most := max_connections()):
        raise InvalidInputError("too many connections", [FieldViolation("--connections", f"{ns.connections:,} is more than {most:,} per server "
                                                                      "(a quarter of the open-file limit, ulimit -n, at most "
                                                                      f"{MAX_CONNECTIONS:,})")])  # fmt: skip
    if ns.num_repeats_add_seed and ns.seed is not None:
        raise InvalidInputError("one seed per request", [FieldViolation("--seed", "not with --num-repeats-add-seed (the body's seed would win)")])
    if not ns.shard and any(split_server(s)[0] is not None for s in ns.server):  # servers by agent (an address may hold "=")
        if ns.ray is not None:
            raise InvalidInputError("servers by agent run processes on this machine", [FieldViolation("--ray", "not with --server AGENT=HOST:PORT")])
        if ns.reverify_failed:
            raise InvalidInputError("--reverify-failed runs in one process", [FieldViolation("--server", "give one environment's plain HOST:PORT with --reverify-failed")])
    if ns.ray is not None:  # after the flags' own combinations: those are wrong with Ray or without
        require_module("ray", "--ray", "ray", "Ray")
    ns.policy = policy_config(ns)
    ns.prepare_row = rows(ns)


def run(ns: argparse.Namespace) -> int:
    if "prepare_row" not in ns:  # (main checks the inputs first; a caller of run alone may not)
        ns.prepare_row = rows(ns)
    if ns.server or ns.shard:
        return _run(ns)
    from gym_metrics.cli._served import serving

    stem = ns.output.name.removesuffix(".jsonl")
    config = Path(ns.benchmark_config).resolve()
    if getattr(ns, "suite", None) is None:
        with serving(config, {None: ns.output.with_name(stem + "_server.log")}) as served:  # gym eval run starts its servers too
            ns.server = [served[None]]
            ns.argv = [*ns.argv, "--server", served[None]]  # (--processes' shards connect to it)
            return _run(ns)
    blocks = {agent: _server_block(ns.suite, agent) for agent in ns.suite_agents}
    logs: dict[str | None, Path] = {block: ns.output.with_name(f"{stem}_server_{block}.log") for block in sorted(set(blocks.values()))}
    with serving(config, logs) as served:  # each resources server the suite's agents point at, as gym eval run starts them
        ns.server = [f"{agent}={served[block]}" for agent, block in blocks.items()]
        ns.argv = [*ns.argv, *(a for entry in ns.server for a in ("--server", entry))]
        return _run(ns)


def _agent_codes(ns: argparse.Namespace) -> Any:
    """The NeMo Gym agents whose own code runs their rows (built on first use): `--agent-code`'s
    config's, else the benchmark config's."""
    config = getattr(ns, "agent_code", None) or getattr(ns, "benchmark_config", None)
    if config is None:
        return None
    from gym_metrics.nemo_gym import load_agents

    return load_agents(config)


def _server_block(suite: Any, agent: str) -> str:
    """The resources server block `agent` points at; InvalidInputError when it points at none."""
    block = suite.servers.get(agent)
    if block is None:
        kind = suite.kinds.get(agent, "?")
        raise InvalidInputError("an agent with no resources server", [FieldViolation("--benchmark", f"{suite.config}: agent {agent!r} ({kind}) names no "
                                "resources_server: collect runs an agent against its resources server (its own code ported, or simple_agent's loop)")])  # fmt: skip
    return str(block)


def _run(ns: argparse.Namespace) -> int:
    from gym_metrics._transport.client import ResourcesClient
    from gym_metrics.cli._push import push_after, push_progress
    from gym_metrics.collector import (
        CollectOptions, Environments, RetryPolicy, Shard, collect_async, collect_processes_async, failures_path_for, max_rollout_attempts_from_env,
    )  # fmt: skip

    if ns.input is None:
        if not ns.reverify_failed:
            raise InvalidInputError("--input is required", [FieldViolation("--input", "the rows to collect (JSONL)")])
        ns.input = failures_path_for(ns.output)
    if ns.max_rollout_attempts is not None and not ns.resume:
        raise InvalidInputError("--max-rollout-attempts bounds resumed runs", [FieldViolation("--max-rollout-attempts", "give it with --resume")])
    if ns.reverify_failed and (ns.reverify or ns.resume):
        raise InvalidInputError("--reverify-failed resumes --output itself", [FieldViolation("--reverify-failed", "give it without --reverify and --resume")])
    token = read_token(ns.auth_token_env)
    progress = None if ns.shard else push_progress(ns)
    watch = None if progress is None else progress.shards_wrote  # the shards' rows, for the pushes of a run of several
    environments = Environments.parse(ns.server)
    options = CollectOptions(
        num_repeats=ns.num_repeats,
        limit=ns.limit,
        max_rollouts=ns.max_rollouts,
        seed_each_rollout=ns.num_repeats_add_seed,
        interleave_repeats=ns.interleave_repeats,
        fan_out=fan_out_map(ns.fan_out),
        resume=ns.resume,
        max_rollout_attempts=ns.max_rollout_attempts or max_rollout_attempts_from_env(),
        on_bad_line=ns.on_bad_line,
        count_errors_as_zero=ns.count_errors_as_zero,
        count_failure_classes_as_zero=tuple(ns.count_failure_classes_as_zero),
        include_rollout_infos=not ns.no_rollout_infos,
        keep_input_fields=ns.keep_input_fields,
        batch_size=ns.batch_size,
        max_in_flight=ns.max_in_flight,
        connections=ns.connections,
        retry=RetryPolicy(max_retries=ns.max_retries),
        connect_timeout=ns.connect_timeout,
        default_agent=ns.agent,
        target=ns.policy if "policy" in ns else policy_config(ns),
        agent_loop=ns.agent_loop,
        max_steps=ns.max_steps,
        prepare_row=ns.prepare_row,
        agents=_agent_codes(ns),
        parallel_tool_calls=ns.parallel_tool_calls,
        capture_model_calls=ns.capture_model_calls,
        capture_payloads=ns.capture_payloads,
        capture_tokens=ns.capture_tokens,
        trajectory=ns.trajectory,
        reverify=ns.reverify,
        reverify_failed=ns.reverify_failed,
        shard=Shard.parse(ns.shard, environments) if ns.shard else None,
        environments=environments,
    )
    if environments is None:
        servers = ns.server
    elif options.shard is not None:  # one of an environment's processes: its servers
        servers = list(environments.servers[options.shard.environment])
    else:  # their parent: each environment's, below
        servers = []

    async def collect() -> Any:
        async with contextlib.AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(ResourcesClient(s, token=token, tls_ca=ns.tls_ca)) for s in servers
            ]
            if options.environments is not None and options.shard is None:  # shards by environment
                opened = {a: await stack.enter_async_context(ResourcesClient(a, token=token, tls_ca=ns.tls_ca))
                          for group in options.environments.servers for a in group}  # fmt: skip
                groups = [[opened[a] for a in group] for group in options.environments.servers]
                return await collect_processes_async([], ns.input, ns.output, ns.argv, ns.processes, options, environments=groups, watch=watch)
            if ns.ray is not None and options.shard is None:
                return await collect_processes_async(clients, ns.input, ns.output, ns.argv, ns.processes if ns.processes > 1 else None,
                                                     options, shards=_on_ray(ns), watch=watch)  # fmt: skip
            if ns.processes > 1 and options.shard is None:
                return await collect_processes_async(clients, ns.input, ns.output, ns.argv, ns.processes, options, watch=watch)
            return await collect_async(clients, ns.input, ns.output, options, progress)

    if options.shard is not None:  # one of --processes N's: its parent reports, pushes, merges and aggregates
        from gym_metrics.collector import die_with_parent

        die_with_parent()
        with fewer_gc_passes():
            run_keeping_result(collect())
        return 0

    started = time.perf_counter()
    with fewer_gc_passes():
        result = run_keeping_result(collect())
    if ns.ray is not None or ns.processes > 1 or options.environments is not None:  # the shards' warnings went to their logs: the lines skipped, said here
        warn_bad_lines(ns.input, result.bad_lines)
    code = push_after(progress, result, report(result, time.perf_counter() - started))
    if getattr(ns, "health", False):  # before the report and the exports: both read the counts it adds to the metrics
        health_after(result.rollouts_path, result.metrics_path, ns.agent)
    report_after(ns, result.metrics_path, result.rollouts_path)
    return export_after(ns, result.metrics_path, code, resume=ns.resume)


def _on_ray(ns: argparse.Namespace) -> Any:
    """collect --ray: the shards as Ray tasks, each running this command's main on its node."""
    import functools

    from gym_metrics.cli import main
    from gym_metrics.ray import collect_shards_on_ray

    return functools.partial(collect_shards_on_ray, input_path=ns.input, command=main, address=ns.ray or None)


