"""`gym-metrics export ROLLOUTS --atif -o DIR`: rollouts recorded with `collect --trajectory`
as ATIF v1.7 trajectories (gym_metrics.recording.export_atif; docs/pipelines.md#atif)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gym_metrics.cli._base import version
from gym_metrics.errors import ExitCode

ORDER = 45  # its place in `gym-metrics --help` (cli/_discovery.py)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("export", help="rollouts (collect --trajectory) as ATIF v1.7 trajectories, one file each")
    p.add_argument("rollouts", type=Path, help="a rollouts JSONL written by `collect --trajectory` (or NeMo Gym's, with ng_trajectory)")
    form = p.add_mutually_exclusive_group(required=True)
    form.add_argument("--atif", dest="format", action="store_const", const="atif", help="the format: ATIF v1.7 (the one format so far)")
    form.add_argument("--format", choices=["atif"], help="the same, as NeMo Gym's `gym eval export --format atif` spells it")
    p.add_argument("-o", "--output-dir", type=Path, required=True, help="the directory to create (it must not exist)")
    p.add_argument("--session-id", help="the trajectories' session_id (default: the rollouts file's stem)")
    p.add_argument("--agent-version", help="the agent's version, one per export (default: gym-metrics VERSION)")
    p.add_argument("--lenient", action="store_true",
                   help="also export rows with observation gaps (listed under extra.gym_metrics.gaps) and token fields "
                   "(as ATIF's prompt_token_ids/completion_token_ids/logprobs); NeMo Gym's strict profile refuses both")  # fmt: skip
    p.add_argument("--skip-refused", action="store_true",
                   help="export the rows that fit and list the others in DIR/refused.jsonl (default: any refusal writes nothing)")  # fmt: skip
    p.set_defaults(func=run)


def run(ns: argparse.Namespace) -> int:
    from gym_metrics.recording import AtifExportError, export_atif

    def progress(rows: int) -> None:
        print(f"export: {rows:,} rows read", file=sys.stderr, flush=True)

    try:
        done = export_atif(
            ns.rollouts, ns.output_dir, session_id=ns.session_id or ns.rollouts.stem,
            agent_version=ns.agent_version or f"gym-metrics {version()}", exporter_version=version(),
            lenient=ns.lenient, skip_refused=ns.skip_refused, progress=progress,
        )  # fmt: skip
    except AtifExportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    refused = f"; {len(done.refused)} refused, listed in {done.output / 'refused.jsonl'}" if done.refused else ""
    print(f"wrote {done.exported} ATIF v1.7 trajectories to {done.output} (manifest.jsonl){refused}")
    return ExitCode.OK
