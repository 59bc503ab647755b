"""The `gym-metrics` command: one module per subcommand (argparse only: parse, call, print),
found by `_discovery` (a private module here defining `add_parsers(sub)` and `ORDER`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gym_metrics.cli._base import (
    ArgParser,
    InputFileError,
    add_global_flags,
    configure_logging,
    refuse_output_over_input,
    report_error,
    version,
)
from gym_metrics._util.atomic import check_output
from gym_metrics._util.grpc_fork import disable_grpc_fork_handlers
from gym_metrics.cli._discovery import command_modules
from gym_metrics.errors import ExitCode


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (docs/commands.md "Exit codes"), never raises (unless --debug)."""
    disable_grpc_fork_handlers()  # before grpc is imported: a verify that forks in a command's own server (check-env, demo) gets a working child
    try:
        ns = _parser().parse_args(argv)
    except SystemExit as exc:  # usage errors (2), --help and --version (0)
        return int(exc.code) if isinstance(exc.code, int) else int(ExitCode.BAD_INPUT)
    configure_logging(ns.log_level)
    ns.argv = list(sys.argv[1:] if argv is None else argv)  # (collect --processes runs them again, a process a shard)
    _warn_old_flags(ns.command, ns.argv)
    previous = _exit_on_sigterm()
    try:
        _check_inputs(ns)
        return int(ns.func(ns) or 0)
    except KeyboardInterrupt:
        _say_stopped(ns, "interrupted (Ctrl-C)")
        return 130  # 128 + SIGINT, the shell's convention (outside the ExitCode table)
    except _Terminated:
        _say_stopped(ns, "stopped (SIGTERM)")
        return 128 + signal.SIGTERM
    except (Exception, asyncio.CancelledError) as exc:  # a stray CancelledError is a failure, not a traceback
        if _terminated and isinstance(exc, asyncio.CancelledError):  # SIGTERM cancelled the command's loop
            _say_stopped(ns, "stopped (SIGTERM)")
            return 128 + signal.SIGTERM
        if ns.debug:
            raise
        return int(report_error(exc))  # a plain int: ExitCode prints as its name on Python 3.10
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


_AFTER_STOP = {
    "collect": "the rows written so far are kept; the same command with --resume goes on from them",
    "evaluate": "nothing was written; run it again",
}


def _say_stopped(ns: argparse.Namespace, how: str) -> None:
    """One line on a stopped command (it ended silently, a progress bar half drawn), and what
    is left of its work where that is not plain."""
    after = _AFTER_STOP.get(ns.command)
    start = "\n" if sys.stderr.isatty() else ""  # below a progress bar's line
    print(f"{start}gym-metrics {ns.command}: {how}" + (f": {after}" if after else ""), file=sys.stderr)


class _Terminated(SystemExit):
    """SIGTERM (`timeout`, Kubernetes, a shell's kill) as an exception: the command's `finally`
    blocks run (temporary files removed, child processes stopped), as on Ctrl-C. Servers
    install their own handler (a graceful stop) while they serve."""


_installed_in: list[int] = []
_terminated: list[bool] = []


def _raise_terminated(signum: int, frame: object) -> None:
    """In a running event loop the loop's tasks are cancelled (an exception raised at an
    arbitrary point could land in code that swallows it: grpc's request consumer does);
    elsewhere _Terminated is raised where the command is."""
    if _installed_in and os.getpid() != _installed_in[-1]:  # a forked worker (a pool's): die as by default
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
    _terminated.append(True)
    loop = asyncio._get_running_loop()
    if loop is not None and not loop.is_closed():
        loop.call_soon_threadsafe(_cancel_tasks, loop)
        return
    raise _Terminated


def _cancel_tasks(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()


def _exit_on_sigterm() -> Any:
    """Install the SIGTERM handler; the one it replaced (None off the main thread, where
    handlers cannot be set: a command run from a library's worker thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    _installed_in[:] = [os.getpid()]
    _terminated.clear()
    return signal.signal(signal.SIGTERM, _raise_terminated)


def _warn_old_flags(command: str, argv: list[str]) -> None:
    """One line on stderr per old flag spelling used (it still works until its removal)."""
    from gym_metrics._util.deprecated import REMOVAL, old_flags_used

    for old, new in old_flags_used(command, argv):
        print(f"gym-metrics {command}: {old} is deprecated; use {new} (removal in {REMOVAL})", file=sys.stderr)


def _check_inputs(ns: argparse.Namespace) -> None:
    """One message for a missing input file, and one for an output that is an input, whatever
    the command; a command's own checks (`check_inputs`) run before anything is sent or started."""
    inputs: list[Path] = []
    for attr in ("rollouts", "input", "partials", "metrics", "compare"):
        value = getattr(ns, attr, None)
        inputs += [p for p in (value if isinstance(value, list) else [value]) if isinstance(p, Path)]
    for path in inputs:
        if not path.exists():
            raise InputFileError(f"input file not found: {path}")
        if not path.is_file():
            raise InputFileError(f"input is not a file: {path}")
    outputs = {"--output": getattr(ns, "output", None), "--partial-out": getattr(ns, "partial_out", None)}
    refuse_output_over_input(outputs, inputs)
    for flag, out in outputs.items():
        if isinstance(out, Path):
            check_output(out, flag)
    check = getattr(ns, "check_inputs", None)
    if check is not None:
        check(ns)


def _parser() -> argparse.ArgumentParser:
    parser = ArgParser(prog="gym-metrics", description="Score LLM and agent rollouts: serve, collect, aggregate, compare, evaluate.")
    add_global_flags(parser)
    parser.set_defaults(log_level="info", debug=False)
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in command_modules():  # each adds its subcommands (collect adds demo too)
        command.add_parsers(sub)
    for command_parser in sub.choices.values():
        add_global_flags(command_parser)
    return parser


class _Version(argparse.Action):
    """--version, looked up only when asked for (importlib.metadata costs ~20 ms per run)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(f"gym-metrics {version()}")
        parser.exit()


__all__ = ["main"]
