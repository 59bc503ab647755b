"""The `gym-metrics` command: serve an environment, aggregate a rollouts file."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gym_metrics._argtypes import non_negative_int, positive_float, positive_int
from gym_metrics._cli_base import (
    EXIT_ALL_FAILED,
    EXIT_BAD_INPUT,
    SHOW_VIOLATIONS,
    ArgParser,
    InputFileError,
    add_global_flags,
    configure_logging,
    report_error,
    version,
)
from gym_metrics.errors import GymMetricsError


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (README "Exit codes"), never raises (unless --debug)."""
    try:
        ns = _parser().parse_args(argv)
    except SystemExit as exc:  # usage errors (2), --help and --version (0)
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    configure_logging(ns.log_level)
    try:
        _check_inputs(ns)
        return int(ns.func(ns) or 0)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if ns.debug:
            raise
        return report_error(exc)


def _check_inputs(ns: argparse.Namespace) -> None:
    """One message for a missing input file, whatever the command; collect's --num-repeats
    with an input that already has indices is refused before any connection."""
    for attr in ("rollouts", "input"):
        path = getattr(ns, attr, None)
        if isinstance(path, Path):
            if not path.exists():
                raise InputFileError(f"input file not found: {path}")
            if not path.is_file():
                raise InputFileError(f"input is not a file: {path}")
    if ns.command == "collect" and ns.num_repeats is not None:
        from gym_metrics.collector._input import check_repeats_input

        check_repeats_input(ns.input)


def _parser() -> argparse.ArgumentParser:
    parser = ArgParser(prog="gym-metrics", description=__doc__)
    add_global_flags(parser)
    parser.set_defaults(log_level="info", debug=False)
    parser.add_argument("--version", action="version", version=f"gym-metrics {version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve an environment over gRPC")
    serve.add_argument("target", help="registered name (e.g. math_exact), module:Class or path/app.py:Class")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=50051, help="0 picks a free port (printed on stderr)")
    serve.add_argument("--workers", type=int, default=1, help="processes sharing the port (SO_REUSEPORT)")
    serve.add_argument(
        "--auth-token-env",
        metavar="VAR",
        help="require `authorization: Bearer $VAR` on every call but health (default: GYM_METRICS_AUTH_TOKEN if set)",
    )
    serve.add_argument("--tls-cert", type=Path, help="PEM certificate chain (enables TLS with --tls-key)")
    serve.add_argument("--tls-key", type=Path, help="PEM private key")
    serve.add_argument("--max-message-mb", type=float, default=64.0, help="max gRPC message size (MiB)")
    serve.add_argument("--grace", type=float, default=10.0, help="seconds in-flight calls get on SIGTERM")
    _add_limit_flags(serve)
    serve.add_argument(
        "--reducers", "--metrics", dest="reducers", nargs="+", metavar="NAME",
        help="reward reducers to report, e.g. pass@1 pass@8 (replaces the env's; --metrics is the old spelling)",
    )  # fmt: skip
    serve.set_defaults(func=_cmd_serve)

    col = sub.add_parser("collect", help="verify rollouts through a server, then aggregate per agent")
    col.add_argument("--server", required=True, metavar="HOST:PORT", help="the resources server")
    col.add_argument("--input", required=True, type=Path, help="JSONL: one task or rollout per line, with agent_ref.name")
    col.add_argument("--output", required=True, type=Path, help="verified rollouts JSONL (appended as they complete)")
    col.add_argument("--num-repeats", type=positive_int, metavar="K", help="expand each line into rollouts 0..K-1")
    col.add_argument("--agent", metavar="NAME", type=_agent_name, help="the agent of lines without an agent_ref")
    col.add_argument("--resume", action="store_true", help="continue an interrupted run: skip rollouts already in --output")
    col.add_argument("--on-bad-line", choices=["fail", "skip"], default="fail", help="stop or skip (and report)")
    col.add_argument("--count-errors-as-zero", action="store_true", help="a failed verify counts as reward 0")
    col.add_argument("--no-rollout-infos", action="store_true", help="omit per-rollout entries in the metrics")
    col.add_argument("--batch-size", type=positive_int, default=256, help="rollouts per VerifyStream batch")
    col.add_argument("--max-in-flight", type=positive_int, default=8, help="unanswered batches at most")
    col.add_argument("--max-retries", type=non_negative_int, default=8, help="retries when the server is unavailable")
    col.add_argument(
        "--connect-timeout", type=positive_float, default=5.0, metavar="S",
        help="seconds the first connection may take; past it exit 4 (default 5)",
    )  # fmt: skip
    col.add_argument("--auth-token-env", metavar="VAR", help="send `authorization: Bearer $VAR`")
    col.add_argument("--tls-ca", type=Path, help="PEM root certificate: connect with TLS")
    col.set_defaults(func=_cmd_collect)

    demo = sub.add_parser("demo", help="serve math_exact in-process and collect its shipped sample")
    demo.add_argument("--out-dir", type=Path, default=Path("demo_out"))
    demo.set_defaults(func=_cmd_demo)

    agg = sub.add_parser("aggregate", help="aggregate a rollouts JSONL in-process (no server)")
    agg.add_argument("rollouts", type=Path, help="rollouts JSONL: one verify response per line")
    agg.add_argument("-o", "--output", type=Path, help="default: <stem>_aggregate_metrics.json beside the input")
    agg.add_argument("--env", metavar="TARGET", help="use this environment's compute_metrics / get_key_metrics")
    agg.add_argument("--no-rollout-infos", action="store_true", help="omit per-rollout entries (much smaller file)")
    agg.add_argument("--expected-rollouts", type=non_negative_int, default=0, metavar="K", help="rollouts each task should have")
    agg.add_argument("--on-bad-line", choices=["fail", "skip"], default="fail", help="stop or skip (and report)")
    agg.add_argument("--agent", metavar="NAME", type=_agent_name, help="the agent of rows without an agent_ref")
    agg.add_argument("--count-errors-as-zero", action="store_true", help="a failed verify (_gm_error) counts as reward 0")
    agg.add_argument("-q", "--quiet", action="store_true", help="print only the output path")
    agg.add_argument("--economics", action="store_true", help="add tokens / wall time / cost per agent (`economics`)")
    agg.set_defaults(func=_cmd_aggregate)

    cmp = sub.add_parser("compare", help="paired difference between two agents over their common tasks")
    cmp.add_argument("rollouts", type=Path, help="rollouts JSONL with both agents")
    cmp.add_argument("--agents", nargs=2, required=True, metavar=("A", "B"), help="report A - B")
    cmp.add_argument(
        "--reducer", "--metric", dest="reducer", default="mean_reward",
        help="mean_reward, pass_rate, pass@k, pass^k or any registered reducer (--metric is the old spelling)",
    )  # fmt: skip
    cmp.add_argument("--resamples", type=positive_int, default=10_000, help="paired bootstrap resamples")
    cmp.add_argument("--seed", type=int, default=0, help="bootstrap seed (same seed, same interval)")
    cmp.add_argument("--field", default="reward", help="the per-rollout reward field")
    cmp.add_argument("--on-bad-line", choices=["fail", "skip"], default="fail", help="stop or skip bad lines")
    cmp.add_argument("--json", action="store_true", help="print the comparison as JSON")
    cmp.set_defaults(func=_cmd_compare)

    ev = sub.add_parser("evaluate", help="score a JSONL dataset with a scorer (in-process or through --server)")
    _evaluate_command().add_arguments(ev)
    ev.set_defaults(func=lambda ns: _evaluate_command().run(ns))
    for command in sub.choices.values():
        add_global_flags(command)
    return parser


def _evaluate_command() -> Any:
    """The evaluate subcommand lives beside the evaluate API (imported on use)."""
    from gym_metrics.evaluation import _command

    return _command




def _add_limit_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per CallLimits field; a call past one is refused with RESOURCE_EXHAUSTED."""
    from gym_metrics._limits import CallLimits

    default = CallLimits()
    for name, kind, what in (
        ("max_rollouts_per_call", positive_int, "rollouts one AggregateMetrics call may send"),
        ("max_tasks_per_call", positive_int, "distinct tasks one AggregateMetrics call may name"),
        ("max_concurrent_aggregations", positive_int, "AggregateMetrics calls running at once"),
        ("max_call_mb", positive_float, "MiB one AggregateMetrics call may send"),
    ):
        parser.add_argument("--" + name.replace("_", "-"), type=kind, default=getattr(default, name),
                            help=f"{what} (default %(default)s)")  # fmt: skip


def _cmd_serve(ns: argparse.Namespace) -> int:
    from gym_metrics._transport import ServerConfig, serve
    from gym_metrics._limits import CallLimits
    from gym_metrics import resolve_server

    env_cls = resolve_server(ns.target)  # fail fast with a clear message, before binding
    token_var = ns.auth_token_env or ("GYM_METRICS_AUTH_TOKEN" if os.environ.get("GYM_METRICS_AUTH_TOKEN") else None)
    token = None
    if token_var:
        token = os.environ.get(token_var)
        if not token:
            raise GymMetricsError(f"--auth-token-env {token_var}: the variable is not set or empty")
    if bool(ns.tls_cert) != bool(ns.tls_key):
        raise GymMetricsError("--tls-cert and --tls-key go together")
    config = ServerConfig(
        host=ns.host,
        port=ns.port,
        max_message_bytes=int(ns.max_message_mb * 1024 * 1024),
        auth_token=token,
        tls_cert_file=ns.tls_cert,
        tls_key_file=ns.tls_key,
        grace_seconds=ns.grace,
        limits=CallLimits(
            max_rollouts_per_call=ns.max_rollouts_per_call,
            max_tasks_per_call=ns.max_tasks_per_call,
            max_concurrent_aggregations=ns.max_concurrent_aggregations,
            max_call_mb=ns.max_call_mb,
        ),
    )
    serve(env_cls, config, workers=ns.workers, reducers=ns.reducers)
    return 0


def _agent_name(text: str) -> str:
    """--agent: a non-empty agent name."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must be a non-empty agent name")
    return text


def _cmd_aggregate(ns: argparse.Namespace) -> int:
    from gym_metrics.aggregate import AggregateOptions, aggregate_file

    compute = keys = columns = None
    if ns.env:
        from gym_metrics import resolve_server

        env = resolve_server(ns.env)()
        compute = env.compute_metrics if env.wants_rows else None
        keys = env.get_key_metrics
        columns = env.column_metrics_hook()
    options = AggregateOptions(
        include_rollout_infos=not ns.no_rollout_infos,
        expected_rollouts_per_task=ns.expected_rollouts,
        count_errors_as_zero=ns.count_errors_as_zero,
    )
    started = time.perf_counter()
    econ: dict[str, dict[str, float | int]] = {}
    extra = _economics_section(econ) if ns.economics else None
    out, results, rollouts = aggregate_file(
        ns.rollouts,
        ns.output,
        options=options,
        compute_metrics=compute,
        get_key_metrics=keys,
        column_metrics=columns,
        on_bad_line=ns.on_bad_line,
        extra=extra,
        default_agent=ns.agent,
    )
    elapsed = time.perf_counter() - started
    for bad in rollouts.bad_lines[:SHOW_VIOLATIONS]:
        print(f"warning: skipped {ns.rollouts}:{bad}", file=sys.stderr)
    if len(rollouts.bad_lines) > SHOW_VIOLATIONS:
        print(f"warning: ... and {len(rollouts.bad_lines) - SHOW_VIOLATIONS} more bad lines", file=sys.stderr)
    if ns.quiet:
        print(out)
        return 0
    print(format_key_metrics({r.agent_name: r.key_metrics for r in results}))
    if econ:
        print("\n" + format_economics(econ) + "\n")
    _print_value_notes(results)
    skipped = f", {len(rollouts.bad_lines)} bad lines skipped" if rollouts.bad_lines else ""
    print(f"{rollouts.rows_read} rollouts, {len(results)} agents in {elapsed:.2f}s{skipped} -> {out}")
    return 0


def _print_value_notes(results: Any) -> None:
    """Values the stats left out, per agent and field, on stderr: nothing is dropped silently."""
    for r in results:
        for counts, what in (
            (r.non_finite_counts, "non-finite values"),
            (r.non_numeric_counts, "non-numeric values (text, objects, lists; never converted)"),
        ):
            if counts:
                listed = ", ".join(f"{k}: {v}" for k, v in counts.items())
                print(f"note: {r.agent_name}: {what} left out of the stats ({listed})", file=sys.stderr)


def _economics_section(into: dict[str, dict[str, float | int]]) -> Any:
    """aggregate_file's `extra` hook: each agent's economics, kept in `into` for the table."""
    from gym_metrics.economics import economics

    def section(agent: str, cols: Any) -> dict[str, Any]:
        into[agent] = economics(cols)
        return {"economics": into[agent]}

    return section


def format_economics(by_agent: dict[str, dict[str, float | int]]) -> str:
    """One row per (agent, usage field): per-rollout mean / p50 / p90, total, and how many
    rollouts lack it; then each agent's cost and tokens per passing task."""
    from gym_metrics.economics import PREFIX

    header = ["agent", "field", "mean", "p50", "p90", "total", "rollouts", "missing"]
    rows = []
    notes = []
    for agent in sorted(by_agent):
        econ = by_agent[agent]
        fields = [k[len(PREFIX) : -len("/missing_rollouts")] for k in econ if k.endswith("/missing_rollouts")]
        for f in fields:
            stats = [econ.get(f"{PREFIX}{f}/{s}") for s in ("mean", "p50", "p90", "total", "rollouts", "missing_rollouts")]
            rows.append([agent, f, *(_fmt(v) for v in stats)])
        per_pass = [
            f"{label} {_fmt(econ[PREFIX + key])}"
            for key, label in (("cost_per_passing_task", "cost"), ("tokens_per_passing_task", "tokens"))
            if PREFIX + key in econ
        ]
        passing = f"{econ[PREFIX + 'passing_tasks']} of {econ[PREFIX + 'tasks']} tasks pass"
        notes.append(f"{agent}: {passing}" + (f"; per passing task: {', '.join(per_pass)}" if per_pass else ""))
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(["economics (per rollout; missing = rollouts without the field, not counted as 0)", *lines, *notes])


def _cmd_compare(ns: argparse.Namespace) -> int:
    import orjson

    from gym_metrics.compare import compare_agents

    agent_a, agent_b = ns.agents  # --agents takes exactly two
    result = compare_agents(
        ns.rollouts, agent_a, agent_b, metric=ns.reducer, resamples=ns.resamples, seed=ns.seed, field=ns.field, on_bad_line=ns.on_bad_line
    )
    if ns.json:
        print(orjson.dumps(result.to_dict(), option=orjson.OPT_INDENT_2).decode())
    else:
        print(result.summary())
    return 0


def _cmd_collect(ns: argparse.Namespace) -> int:
    import grpc

    from gym_metrics._transport._client import ResourcesClient
    from gym_metrics.collector import CollectOptions, RetryPolicy, collect_async

    token = None
    if ns.auth_token_env:
        token = os.environ.get(ns.auth_token_env)
        if not token:
            raise GymMetricsError(f"--auth-token-env {ns.auth_token_env}: the variable is not set or empty")
    credentials = grpc.ssl_channel_credentials(ns.tls_ca.read_bytes()) if ns.tls_ca else None
    options = CollectOptions(
        num_repeats=ns.num_repeats,
        resume=ns.resume,
        on_bad_line=ns.on_bad_line,
        count_errors_as_zero=ns.count_errors_as_zero,
        include_rollout_infos=not ns.no_rollout_infos,
        batch_size=ns.batch_size,
        max_in_flight=ns.max_in_flight,
        retry=RetryPolicy(max_retries=ns.max_retries),
        connect_timeout=ns.connect_timeout,
        default_agent=ns.agent,
    )

    async def run() -> Any:
        async with ResourcesClient(ns.server, token=token, credentials=credentials) as client:
            return await collect_async(client, ns.input, ns.output, options)

    started = time.perf_counter()
    result = asyncio.run(run())
    return _report_collect(result, time.perf_counter() - started)


def _report_collect(result: Any, elapsed: float) -> int:
    """Print the key metrics and counts; the exit code: 3 when every rollout of an agent
    failed verification (the files are written all the same), else 0."""
    print(format_key_metrics({a.agent_name: a.key_metrics for a in result.aggregates}))
    _print_value_notes(result.aggregates)
    parts = [f"{result.verified} verified", f"{result.passed_through} already scored"]
    if result.skipped_done:
        parts.append(f"{result.skipped_done} already in the output (resumed)")
    if result.bad_lines:
        parts.append(f"{len(result.bad_lines)} bad lines skipped")
    print(f"{', '.join(parts)} in {elapsed:.2f}s")
    print(f"rollouts -> {result.rollouts_path}\nmetrics  -> {result.metrics_path}")
    for f in result.failed_agents:
        kinds = ", ".join(f"{kind}: {n}" for kind, n in f.by_kind.items())
        print(
            f"error: agent {f.agent}: {f.rollouts} of {f.rollouts} rollouts failed verification ({kinds})"
            f" — see _gm_error in {result.rollouts_path}",
            file=sys.stderr,
        )
    return EXIT_ALL_FAILED if result.failed_agents else 0


def _cmd_demo(ns: argparse.Namespace) -> int:
    from gym_metrics_servers.math_exact import SAMPLE_PATH, MathExactServer

    from gym_metrics._transport import ServerConfig, start_server
    from gym_metrics._transport._client import ResourcesClient
    from gym_metrics.collector import collect_async

    out = ns.out_dir / "math_exact_rollouts.jsonl"
    for stale in (out, out.with_name(f"{out.stem}_aggregate_metrics.json")):
        stale.unlink(missing_ok=True)

    async def run() -> Any:
        server = await start_server(MathExactServer(), ServerConfig(port=0, log_requests=False))
        print(f"math_exact serving on {server.address}; collecting {SAMPLE_PATH.name}", file=sys.stderr)
        try:
            async with ResourcesClient(server.address) as client:
                return await collect_async(client, SAMPLE_PATH, out)
        finally:
            await server.stop(0)

    started = time.perf_counter()
    result = asyncio.run(run())
    return _report_collect(result, time.perf_counter() - started)


def format_key_metrics(by_agent: dict[str, dict[str, Any]]) -> str:
    """A plain-text table: one row per agent, one column per key metric."""
    columns: list[str] = []
    for metrics in by_agent.values():
        columns += [k for k in metrics if k not in columns]
    header = ["agent", *columns]
    rows = [[name, *(_fmt(by_agent[name].get(c)) for c in columns)] for name in sorted(by_agent)]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
