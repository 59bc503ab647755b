"""`gym-metrics evaluate`: score a JSONL dataset with a scorer, write the SPEC C4 result."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from gym_metrics._argtypes import non_negative_int, positive_int
from gym_metrics.errors import GymMetricsError, InvalidInputError
from gym_metrics.evaluation._jsonl import read_rows
from gym_metrics.evaluation._result import EvaluationResult
from gym_metrics.evaluation._run import evaluate
from gym_metrics.scorers import get_scorer

SHOW = 20
"""Bad lines and row errors printed at most (all are in the result file)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scorer", "--metric", dest="scorer", metavar="NAME",
        help="registered scorer, e.g. tool_call_accuracy (optional with --server; --metric is NeMo Evaluator's word)",
    )  # fmt: skip
    p.add_argument(
        "--scorer-config", "--metric-config", dest="scorer_config", type=Path, metavar="FILE",
        help="the scorer's options: a JSON object (.yaml if pyyaml is installed)",
    )  # fmt: skip
    p.add_argument("--input", required=True, type=Path, help="JSONL: one row (JSON object) per line")
    p.add_argument("-o", "--output", type=Path, help="default: <stem>_<scorer>_results.json beside the input")
    p.add_argument("--parallelism", type=positive_int, default=16, help="rows scored at once (in-process)")
    p.add_argument("--limit-samples", type=non_negative_int, metavar="N", help="score only the first N rows")
    p.add_argument("--server", metavar="HOST:PORT", help="score through a running environment (rows are verify bodies)")
    p.add_argument("--auth-token-env", metavar="VAR", help="with --server: send `authorization: Bearer $VAR`")


def run(ns: argparse.Namespace) -> int:
    if ns.server is None and not ns.scorer:
        raise InvalidInputError("--scorer is required (or --server to score through an environment)")
    if ns.server is not None and ns.scorer_config is not None:
        raise InvalidInputError(
            "--scorer-config configures in-process scorers; a server's environment is configured where it runs"
        )
    scorer = get_scorer(ns.scorer, _read_config(ns.scorer_config)) if ns.server is None else None
    if not ns.input.is_file():
        raise GymMetricsError(f"no such file: {ns.input}")

    bad_lines: list[tuple[int, str]] = []
    n_bad = 0

    def on_bad_line(number: int, reason: str) -> None:
        nonlocal n_bad
        n_bad += 1
        if len(bad_lines) < SHOW:
            bad_lines.append((number, reason))

    rows = read_rows(ns.input, on_bad_line)
    started = time.perf_counter()
    if scorer is not None:
        result = evaluate(scorer, rows, parallelism=ns.parallelism, limit_samples=ns.limit_samples)
    else:
        result = asyncio.run(_remote(ns, rows))
    elapsed = time.perf_counter() - started

    name = ns.scorer or result.metric
    out = ns.output or ns.input.with_name(f"{ns.input.stem}_{_safe(name)}_results.json")
    result.write_json(out)

    for number, reason in bad_lines:
        print(f"warning: {ns.input}:{number}: {reason}", file=sys.stderr)
    if n_bad > len(bad_lines):
        print(f"warning: ... and {n_bad - len(bad_lines)} more bad lines", file=sys.stderr)
    row_errors = [(i, f) for i, f in result.errors.items() if f.field != "json"]
    for i, failure in row_errors[:SHOW]:
        print(f"note: row {i}: {failure.field}: {failure.reason}", file=sys.stderr)
    if len(row_errors) > SHOW:
        print(f"note: ... and {len(row_errors) - SHOW} more rows with errors", file=sys.stderr)

    print(format_scores(result))
    rate = f" ({len(result) / elapsed:,.0f} rows/s)" if elapsed > 0 else ""
    errors = f", {len(result.errors)} with errors" if result.errors else ""
    where = "" if ns.output else " (beside the input; -o writes elsewhere)"
    print(f"{len(result)} rows{errors} scored by {name} in {elapsed:.2f}s{rate}; result written to {out}{where}")
    return 0


async def _remote(ns: argparse.Namespace, rows: Any) -> EvaluationResult:
    from gym_metrics.evaluation._remote import evaluate_remote_async

    token = None
    if ns.auth_token_env:
        token = os.environ.get(ns.auth_token_env)
        if not token:
            raise GymMetricsError(f"--auth-token-env {ns.auth_token_env}: the variable is not set or empty")
    return await evaluate_remote_async(ns.server, rows, limit_samples=ns.limit_samples, token=token)


def format_scores(result: EvaluationResult) -> str:
    """One line per score: count, NaN count, mean, sample std, min, max."""
    header = ["score", "count", "nan_count", "mean", "std_dev", "min", "max"]
    lines = [header]
    for s in result.stats:
        lines.append([s.name, str(s.count), str(s.nan_count), *(_fmt(v) for v in (s.mean, s.std_dev, s.min, s.max))])
    widths = [max(len(line[k]) for line in lines) for k in range(len(header))]
    text = ["  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip() for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(text)


def _read_config(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    text = path.read_bytes()
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml  # type: ignore[import-untyped]
        except ImportError:
            raise GymMetricsError(f"{path}: YAML needs pyyaml (not installed); write the config as JSON") from None
        try:
            config = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InvalidInputError(f"{path}: not valid YAML: {exc}") from None
    else:
        try:
            config = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise InvalidInputError(f"{path}: not valid JSON: {exc}") from None
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise InvalidInputError(f"{path}: the scorer config must be an object, got {type(config).__name__}")
    return config


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@^-]+", "_", name)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


