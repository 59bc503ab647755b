"""`gym-metrics jobs serve|submit|list|status|wait|result|cancel`: the durable job server and
its client commands (docs/evaluation.md#job-server)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from gym_metrics._util.atomic import written_atomically
from gym_metrics.cli._base import (
    add_global_flags,
    format_table,
    grace_seconds,
    int_in,
    listen_host,
    non_negative_int,
    positive_float,
    positive_int,
    add_access_flags,
    read_token,
    server_address,
    server_token,
)
from gym_metrics.errors import ExitCode, FieldViolation, GymMetricsError, InvalidInputError

INT32_MAX = 2**31 - 1
STATES = ("QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED")
_EXIT_BY_STATE = {"SUCCEEDED": ExitCode.OK, "FAILED": ExitCode.FAILED, "CANCELLED": ExitCode.UNAVAILABLE}


ORDER = 80  # its place in `gym-metrics --help` (cli/_discovery.py)


def add_parsers(sub: Any) -> None:
    jobs = sub.add_parser("jobs", help="durable evaluation jobs: a job server and its client commands")
    commands = jobs.add_subparsers(dest="jobs_command", required=True)
    _add_serve(commands)
    _add_submit(commands)
    p = _client_parser(commands, "list", "jobs, oldest first")
    p.add_argument("--state", type=str.upper, choices=STATES, help="only jobs in this state")
    p.set_defaults(func=run_list)
    _client_parser(commands, "status", "one job's state and progress", job_id=True).set_defaults(func=run_status)
    p = _client_parser(commands, "wait", "follow a job until it ends (progress on stderr)", job_id=True)
    p.add_argument("--timeout", type=positive_float, metavar="S", help="give up after S seconds (exit 4)")
    p.set_defaults(func=run_wait)
    p = _client_parser(commands, "result", "a finished job's result (the JSON `evaluate` writes)", job_id=True)
    p.add_argument("-o", "--output", type=Path, help="write it here (default: stdout)")
    p.set_defaults(func=run_result)
    _client_parser(commands, "cancel", "stop a queued or running job", job_id=True).set_defaults(func=run_cancel)
    for command_parser in commands.choices.values():
        add_global_flags(command_parser)


def _add_serve(commands: Any) -> None:
    p = commands.add_parser("serve", help="run the job server (jobs persist in --db and resume after a restart)")
    p.add_argument("--db", required=True, type=Path, help="SQLite file holding the jobs and their row results")
    p.add_argument("--host", default="127.0.0.1", type=listen_host, help="the address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=50052, help="0 picks a free port (printed on stderr)")
    p.add_argument("--max-jobs", type=positive_int, default=2, help="jobs running at once (default %(default)s)")
    p.add_argument("--data-root", type=Path, metavar="DIR", help="directory that dataset paths of jobs are read under (any file in it: keep --db and --secrets-file outside it)")
    p.add_argument(
        "--secrets-file", type=Path, metavar="FILE",
        help='JSON, mode 0600: {"NAME": "value"} or {"NAME": {"value": ..., "hosts": [HOST, ...]}}: the secrets jobs may name',
    )  # fmt: skip
    p.add_argument(
        "--secret-env", action="append", default=[], metavar="NAME[=HOST,...]",
        help="let jobs use this environment variable as a secret, optionally only towards these hosts (repeatable); "
        "no other variable of the server is ever reachable by a job",
    )  # fmt: skip
    p.add_argument(
        "--max-parallelism", type=positive_int, default=128, metavar="N",
        help="largest `parallelism` a job may ask for (default %(default)s); more is refused at submit",
    )  # fmt: skip
    add_access_flags(p)
    p.add_argument("--grace", type=grace_seconds, default=10.0, help="seconds in-flight calls get on SIGTERM (0..3600)")
    p.add_argument("--prometheus-port", type=int, metavar="P", help="serve Prometheus metrics on this port (needs the prometheus extra)")
    p.set_defaults(func=run_serve)


def _client_parser(commands: Any, name: str, help: str, *, job_id: bool = False) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = commands.add_parser(name, help=help)
    if job_id:
        p.add_argument("job_id", metavar="ID")
    p.add_argument("--server", required=True, metavar="HOST:PORT", type=server_address, help="the job server")
    p.add_argument("--auth-token-env", metavar="VAR", help="send `authorization: Bearer $VAR`")
    p.add_argument("--tls-ca", type=Path, metavar="FILE", help="connect with TLS, trusting this PEM root certificate")
    return p


def _add_submit(commands: Any) -> None:
    p = _client_parser(commands, "submit", "queue a job: a scorer over a dataset; prints the job id")
    p.add_argument("--scorer", "--metric", dest="scorer", required=True, metavar="NAME", help="registered scorer, e.g. tool_call_accuracy")
    p.add_argument(
        "--scorer-config", "--metric-config", dest="scorer_config", type=Path, metavar="FILE",
        help="the scorer's options: a JSON object (.yaml if pyyaml is installed); API keys by name (api_key_env)",
    )  # fmt: skip
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", type=Path, help="JSONL rows, read here and sent with the job")
    source.add_argument("--input-path", metavar="PATH", help="JSONL file on the server, relative to its --data-root")
    p.add_argument(
        "--parallelism", type=int_in(1, INT32_MAX, " (the job protocol's 32-bit field)"),
        help="rows scored at once (server default 16)",
    )  # fmt: skip
    p.add_argument("--limit-samples", type=non_negative_int, metavar="N", help="score only the first N rows")
    p.add_argument("--target-config", type=Path, metavar="TARGET.json", help="online evaluation: the model or agent target")
    p.add_argument("--prompt-template", type=Path, metavar="TEMPLATE.json", help="with a model target: the request rendered per row")
    p.add_argument("--secret", action="append", default=[], metavar="NAME", help="a secret the job needs, by name (repeatable)")
    p.add_argument("--wait", action="store_true", help="then follow the job until it ends (exit code as `jobs wait`)")
    p.add_argument(
        "--request-id", metavar="ID",
        help="makes the submission safe to run again: the same ID and spec answer the job first stored (default: a new "
        "UUID each run, which covers the command's own retries)",
    )  # fmt: skip
    p.set_defaults(func=run_submit)


def _client(ns: argparse.Namespace) -> Any:
    from gym_metrics._transport.client import JobClient

    return JobClient(ns.server, auth_token=read_token(ns.auth_token_env), tls_ca=ns.tls_ca)


def _read_json_object(path: Path, what: str) -> dict[str, Any]:
    try:
        data = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise InvalidInputError(f"cannot read the {what}: {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise InvalidInputError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidInputError(f"{path}: the {what} must be a JSON object, got {type(data).__name__}")
    return data


def _spec(ns: argparse.Namespace) -> dict[str, Any]:
    """The job spec from the flags; --input rows are read here (bad lines are row errors)."""
    from gym_metrics.evaluation import read_scorer_config

    if ns.prompt_template is not None and ns.target_config is None:
        raise InvalidInputError("--prompt-template goes with --target-config: it builds the request sent to the target")
    dataset: dict[str, Any] = {"path": ns.input_path} if ns.input is None else {"rows": _rows(ns.input)}
    return {
        "scorer": ns.scorer,
        "scorer_config": read_scorer_config(ns.scorer_config),
        "dataset": dataset,
        "run": {"parallelism": ns.parallelism, "limit_samples": ns.limit_samples},
        "target": None if ns.target_config is None else _read_json_object(ns.target_config, "target config"),
        "prompt_template": None if ns.prompt_template is None else _read_json_object(ns.prompt_template, "prompt template"),
        "secrets": list(dict.fromkeys(ns.secret)),
    }


def _rows(path: Path) -> list[Any]:
    """--input's rows; a line that is not a JSON object is refused here, naming the file and
    line (a job's inline rows are JSON values, so it could not carry the line's error)."""
    from gym_metrics.evaluation import read_rows

    bad: list[FieldViolation] = []
    rows = [row for row in read_rows(path, lambda n, why: bad.append(FieldViolation(str(path), why, n, "line")))]
    if bad:
        raise InvalidInputError(f"{path}: {len(bad)} line(s) are not JSON objects", bad)
    return rows


def run_serve(ns: argparse.Namespace) -> int:
    from gym_metrics._transport.jobs import JobServerOptions, serve_jobs
    from gym_metrics._transport.server import ServerConfig
    from gym_metrics.jobs import parse_allow_env

    if bool(ns.tls_cert) != bool(ns.tls_key):
        raise GymMetricsError("--tls-cert and --tls-key go together")
    token = server_token(ns)
    config = ServerConfig(
        host=ns.host, port=ns.port, auth_token=token, tls_cert_file=ns.tls_cert, tls_key_file=ns.tls_key, grace_seconds=ns.grace
    )
    options = JobServerOptions(
        db=ns.db, max_jobs=ns.max_jobs, data_root=ns.data_root, secrets_file=ns.secrets_file,
        secret_env=parse_allow_env(ns.secret_env), max_parallelism=ns.max_parallelism, prometheus_port=ns.prometheus_port,
    )  # fmt: skip
    serve_jobs(config, options)
    return ExitCode.OK


def run_submit(ns: argparse.Namespace) -> int:
    spec = _spec(ns)
    with _client(ns) as client:
        info = client.submit(spec, ns.request_id)
        print(info.job_id, flush=True)
        if not ns.wait:
            return ExitCode.OK
        return _follow(client, info.job_id, None)


def run_list(ns: argparse.Namespace) -> int:
    with _client(ns) as client:
        jobs, token = client.list(ns.state)
        while token:
            more, token = client.list(ns.state, page_token=token)
            jobs += more
    rows = [[j.job_id, j.state, j.spec.get("scorer", ""), _progress(j), str(j.failed)] for j in jobs]
    print(format_table(["job", "state", "scorer", "done/total", "failed"], rows))
    return ExitCode.OK


def run_status(ns: argparse.Namespace) -> int:
    with _client(ns) as client:
        info = client.get(ns.job_id)
    print(f"{info.job_id} {info.state} {_progress(info)} rows, {info.failed} failed, {info.rows_per_second:,.1f} rows/s")
    if info.error:
        print(f"error: {info.error}")
    return ExitCode.OK


def run_wait(ns: argparse.Namespace) -> int:
    with _client(ns) as client:
        return _follow(client, ns.job_id, ns.timeout)


def run_result(ns: argparse.Namespace) -> int:
    with _client(ns) as client:
        result = client.result(ns.job_id)
    data = orjson.dumps(result, option=orjson.OPT_INDENT_2)
    if ns.output is None:
        sys.stdout.buffer.write(data + b"\n")
        sys.stdout.flush()
    else:
        _write_atomic(ns.output, data)
        print(f"result of job {ns.job_id} ({len(result['row_scores'])} rows) written to {ns.output}", file=sys.stderr)
    return ExitCode.OK


def run_cancel(ns: argparse.Namespace) -> int:
    with _client(ns) as client:
        info = client.cancel(ns.job_id)
    print(f"{info.job_id} {info.state}")
    return ExitCode.OK


def _progress(info: Any) -> str:
    return f"{info.done}/{'?' if info.total is None else info.total}"


def _follow(client: Any, job_id: str, timeout: float | None) -> int:
    """Progress lines on stderr from WatchJob; the exit code of the final state."""
    last = None
    for info in client.watch(job_id, timeout=timeout):
        line = f"job {job_id}: {info.state} {_progress(info)} rows, {info.failed} failed, {info.rows_per_second:,.1f} rows/s"
        if line != last:
            print(line, file=sys.stderr, flush=True)
            last = line
        if info.final:
            if info.error:
                print(f"error: job {job_id} {info.state}: {info.error}", file=sys.stderr)
            return _EXIT_BY_STATE.get(info.state, ExitCode.BAD_INPUT)
    return ExitCode.UNAVAILABLE  # unreachable: watch raises when the stream ends early


def _write_atomic(path: Path, data: bytes) -> None:
    with written_atomically(path) as tmp:
        tmp.write_bytes(data)
