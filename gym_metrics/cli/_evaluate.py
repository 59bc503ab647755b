"""`gym-metrics evaluate`: score a JSONL dataset with a scorer, write the result file
(docs/evaluation.md)."""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

from gym_metrics.cli._base import fmt, format_table, non_negative_int, positive_int, read_token, server_address
from gym_metrics.errors import ExitCode, InvalidInputError

PARALLELISM = 16
"""Rows scored at once in-process when --parallelism is not given."""
SHOW = 20
"""Bad lines and row errors printed at most (all are in the result file)."""


ORDER = 70  # its place in `gym-metrics --help` (cli/_discovery.py)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("evaluate", help="score a JSONL dataset with a scorer (in-process or through --server)")
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
    p.add_argument("--parallelism", type=positive_int, help=f"rows scored at once (in-process, not with --server; default {PARALLELISM})")
    p.add_argument("--limit-samples", type=non_negative_int, metavar="N", help="score only the first N rows")
    p.add_argument("--server", metavar="HOST:PORT", type=server_address, help="score through a running environment (rows are verify bodies)")
    p.add_argument("--auth-token-env", metavar="VAR", help="with --server or --tools-server: send `authorization: Bearer $VAR`")
    p.add_argument(
        "--target-config", type=Path, metavar="TARGET.json",
        help="online evaluation: generate each row's response with this model or agent target first (docs/targets.md)",
    )  # fmt: skip
    p.add_argument(
        "--prompt-template", type=Path, metavar="TEMPLATE.json",
        help='with a model target: the request rendered per row, e.g. {"messages": [{"role": "user", "content": "{{item.user_input}}"}]}',
    )  # fmt: skip
    p.add_argument(
        "--tools-server", metavar="HOST:PORT", type=server_address,
        help="with a model target: run each row as a multi-turn episode over this environment's tools (its trajectory is scored)",
    )  # fmt: skip
    p.add_argument("--max-steps", type=positive_int, metavar="N", help="with --tools-server: policy calls one episode may make")
    p.add_argument(
        "--parallel-tool-calls", action="store_true",
        help="with --tools-server: run the tool calls of one turn concurrently (default: in the model's order, as NeMo Gym does)",
    )  # fmt: skip
    p.add_argument(
        "--capture-model-calls", action="store_true",
        help="with --target-config: each row's `generated` also holds ng_model_call_capture (every call to the target: "
        "status, timing, tokens, finish reason; docs/pipelines.md#recording)",
    )  # fmt: skip
    p.set_defaults(func=run)


def _check(ns: argparse.Namespace) -> None:
    """Flags that do not go together, refused before any row is read."""
    if ns.server is None and not ns.scorer:
        raise InvalidInputError("--scorer is required (or --server to score through an environment)")
    if ns.server is not None and ns.scorer_config is not None:
        raise InvalidInputError(
            "--scorer-config configures in-process scorers; a server's environment is configured where it runs"
        )
    if ns.prompt_template is not None and ns.target_config is None:
        raise InvalidInputError("--prompt-template goes with --target-config: it builds the request sent to the target")
    if ns.server is not None and ns.target_config is not None:
        raise InvalidInputError("--target-config works with in-process scorers (--scorer), not with --server")
    if ns.tools_server is not None and ns.target_config is None:
        raise InvalidInputError("--tools-server goes with --target-config: the target is the episode's policy")
    if ns.capture_model_calls and ns.target_config is None:
        raise InvalidInputError("--capture-model-calls goes with --target-config: it records the target's calls")
    for flag, given in (("--max-steps", ns.max_steps is not None), ("--parallel-tool-calls", ns.parallel_tool_calls)):
        if given and ns.tools_server is None:
            raise InvalidInputError(f"{flag} goes with --tools-server")
    if ns.parallelism is not None and ns.server is not None:  # (the server's batches were sent as they are; it set nothing)
        raise InvalidInputError("--parallelism sets the in-process scorer's rows at once; not with --server (it scores in batches of its own)")
    if ns.auth_token_env is not None and ns.server is None and ns.tools_server is None:  # (no call carried it)
        raise InvalidInputError("--auth-token-env goes with --server or --tools-server: the token is sent to them")


def run(ns: argparse.Namespace) -> int:
    _check(ns)
    from gym_metrics._util.progress import estimate_lines
    from gym_metrics.evaluation import RowProgress, evaluate, read_rows, read_scorer_config
    from gym_metrics.scorers import get_scorer

    scorer = _scorer(ns, get_scorer, read_scorer_config) if ns.server is None else None

    bad_lines: list[tuple[int, str]] = []
    n_bad = 0

    def on_bad_line(number: int, reason: str) -> None:
        nonlocal n_bad
        n_bad += 1
        if len(bad_lines) < SHOW:
            bad_lines.append((number, reason))

    rows = read_rows(ns.input, on_bad_line)
    total = estimate_lines(ns.input)
    progress = RowProgress(total if ns.limit_samples is None or total is None else min(total, ns.limit_samples))
    started = time.perf_counter()
    try:
        if scorer is not None:
            from gym_metrics.evaluation import ToolEnvironment

            tools = None if ns.tools_server is None else ToolEnvironment(
                ns.tools_server, ns.max_steps, read_token(ns.auth_token_env), parallel_tool_calls=ns.parallel_tool_calls
            )
            result = evaluate(
                scorer, rows, parallelism=ns.parallelism or PARALLELISM, limit_samples=ns.limit_samples,
                target=ns.target_config, prompt_template=ns.prompt_template, progress=progress, tools=tools,
                capture_model_calls=ns.capture_model_calls,
            )  # fmt: skip
        else:
            import asyncio  # here, not at import: other commands start without it

            result = asyncio.run(_remote(ns, rows, progress))
    finally:
        progress.close()
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
    if ns.target_config is not None:
        print(generation_summary(result))
    rate = f" ({len(result) / elapsed:,.0f} rows/s)" if elapsed > 0 else ""
    errors = f", {len(result.errors)} with errors" if result.errors else ""
    where = "" if ns.output else " (beside the input; -o writes elsewhere)"
    print(f"{len(result)} rows{errors} scored by {name} in {elapsed:.2f}s{rate}; result written to {out}{where}")
    if len(result) and len(result.errors) == len(result):  # nothing scored: a broken target, scorer or input, not a score
        print(f"error: every one of the {len(result)} rows failed (see the notes above and {out})", file=sys.stderr)
        return ExitCode.ALL_FAILED
    return 0


def _scorer(ns: argparse.Namespace, get_scorer: Any, read_config: Any) -> Any:
    """The scorer; one that needs options given none (a judge: its url and model) names
    --scorer-config and what it needs, in one line."""
    try:
        return get_scorer(ns.scorer, read_config(ns.scorer_config))
    except InvalidInputError as exc:
        if ns.scorer_config is not None or not exc.violations:
            raise
        needed = ", ".join(v.field.removeprefix("config.") for v in exc.violations)
        raise InvalidInputError(
            f"{ns.scorer} needs options: give --scorer-config FILE, a JSON object with {needed}"
        ) from None


async def _remote(ns: argparse.Namespace, rows: Any, progress: Any) -> Any:
    from gym_metrics.evaluation import evaluate_remote_async

    token = read_token(ns.auth_token_env)
    return await evaluate_remote_async(ns.server, rows, limit_samples=ns.limit_samples, token=token, progress=progress)


def format_scores(result: Any) -> str:
    """One line per score: count, NaN count, mean, std, min, max."""
    rows = [[s.name, str(s.count), str(s.nan_count), *(fmt(v) for v in (s.mean, s.std_dev, s.min, s.max))] for s in result.stats]
    return format_table(["score", "count", "nan_count", "mean", "std_dev", "min", "max"], rows)


def generation_summary(result: Any) -> str:
    """Rows generated and failed, tokens, mean latency (online evaluation)."""
    entries = list(result.generated.values())
    failed = sum(1 for f in result.errors.values() if f.field == "target")
    tokens_in = sum(e["usage"]["input_tokens"] or 0 for e in entries)
    tokens_out = sum(e["usage"]["output_tokens"] or 0 for e in entries)
    latency = sum(e["latency_s"] for e in entries) / len(entries) if entries else 0.0
    return (
        f"generated {len(entries)} responses ({failed} failed), {tokens_in:,} input / {tokens_out:,} output tokens, "
        f"mean latency {latency:.3f}s"
    )


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@^-]+", "_", name)
