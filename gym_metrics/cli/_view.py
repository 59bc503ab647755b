"""`gym-metrics view [FILES or DIR] [--host H] [--port P]`: the rollout viewer, a local web app
over rollout files, metrics files and a collect in progress (gym_metrics.view; docs/viewer.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gym_metrics.cli._base import listen_host
from gym_metrics.errors import ExitCode

ORDER = 92  # its place in `gym-metrics --help` (cli/_discovery.py)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("view", help="browse rollouts in a local web app: runs, tasks, filters, one rollout whole, two runs side by side; follows a collect live")
    p.add_argument("paths", type=Path, nargs="*", help="rollout files (.jsonl), metrics files, or folders of them (default: this folder)")
    p.add_argument("--host", default="127.0.0.1", type=listen_host, help="the address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8765, help="the port (default 8765; 0 picks a free one)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="another Host name a browser may reach the viewer by (repeatable; with --host 0.0.0.0, the machine's name or address)")  # fmt: skip
    p.add_argument("--open", action="store_true", help="open the page in the default browser")
    p.set_defaults(func=run)


def run(ns: argparse.Namespace) -> int:
    from gym_metrics.errors import InvalidInputError
    from gym_metrics.view import make_app, serve

    try:
        app = make_app(ns.paths or [Path(".")], ns.host, ns.allow_host)
    except InvalidInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT

    def ready(url: str) -> None:
        runs = ", ".join(run.name for run in app.runs[:5]) + (f" and {len(app.runs) - 5} more" if len(app.runs) > 5 else "")
        print(f"gym-metrics view: {url} ({runs}); Ctrl-C stops", flush=True)
        if ns.open:
            import webbrowser

            webbrowser.open(url)

    try:
        serve(app, ns.host, ns.port, on_ready=ready)
    except InvalidInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except KeyboardInterrupt:
        pass
    return ExitCode.OK
