"""What every `gym-metrics` command shares: the argument parser, exit codes, logging set-up and
one-line error messages (DESIGN "Command-line conventions")."""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from gym_metrics.errors import GymMetricsError, InvalidInputError

EXIT_OK = 0
EXIT_FAILED = 1
"""A job FAILED or a verdict FAIL (and an unexpected internal error)."""
EXIT_BAD_INPUT = 2
"""A usage error or bad input (argparse's own usage errors exit 2 too)."""
EXIT_ALL_FAILED = 3
"""Every rollout of an agent failed, or a verdict INCONCLUSIVE."""
EXIT_UNAVAILABLE = 4
"""The server is unreachable, a job was cancelled, or a wait timed out."""
SHOW_VIOLATIONS = 20
THIRD_PARTY_LOGGERS = ("asyncio", "grpc", "h11", "h2", "hpack", "httpcore", "httpx", "jinja2", "openai", "urllib3")
"""Kept at WARNING unless --log-level debug: an INFO line per HTTP request is noise."""


class InputFileError(GymMetricsError):
    """The input file named on the command line is missing or not a file."""


class ArgParser(argparse.ArgumentParser):
    """No abbreviations (`--num-repeat` is not `--num-repeats`), and an unknown flag is named
    before any missing required one (argparse reports those first). Subparsers are made of the
    same class, so every command's parser behaves the same."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        args = list(sys.argv[1:] if args is None else args)
        if self._subparsers is None:  # a command's own parser: every flag is known here
            unknown = self._unknown_flags(args)
            if unknown:
                self._refuse(unknown)
        return super().parse_known_args(args, namespace)

    def _unknown_flags(self, args: list[str]) -> list[str]:
        unknown = []
        for arg in args:
            if arg == "--":
                break
            if arg.startswith("--") and len(arg) > 2:
                name = arg.split("=", 1)[0]
            elif arg.startswith("-") and len(arg) > 1 and not self._negative_number_matcher.match(arg):
                name = arg[:2]
            else:
                continue
            if name not in self._option_string_actions:
                unknown.append(name)
        return unknown

    def _refuse(self, unknown: list[str]) -> NoReturn:
        known = [o for o in self._option_string_actions if o.startswith("--")]
        hints = [f"{u} (did you mean {m[0]}?)" if (m := difflib.get_close_matches(u, known, n=1)) else u for u in unknown]
        self.error(f"unrecognized arguments: {' '.join(hints)}")


def add_global_flags(parser: argparse.ArgumentParser) -> None:
    """--log-level and --debug, on the program and on every command (so `aggregate X --debug`
    works too); a command's copy sets the value only when given."""
    parser.add_argument(
        "--log-level", default=argparse.SUPPRESS, choices=["debug", "info", "warning", "error"],
        help="default: info; third-party libraries (httpx, grpc, ...) log only warnings unless debug",
    )  # fmt: skip
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show the traceback of an error")


def configure_logging(level_name: str) -> None:
    level = getattr(logging, level_name.upper())
    logging.basicConfig(level=level, format="%(message)s", stream=sys.stderr)
    for name in THIRD_PARTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if level <= logging.DEBUG else max(level, logging.WARNING))
    # gRPC's C core writes its own lines to stderr (a failed bind, GOAWAYs); our messages say
    # what went wrong. Read when grpc starts, so set before any channel or server exists.
    if level > logging.DEBUG:
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("gym-metrics")
    except PackageNotFoundError:
        return "unknown"


def report_error(exc: BaseException) -> int:
    """The error in one line on stderr (violations listed when several); the exit code."""
    if isinstance(exc, InvalidInputError):
        print_invalid(exc)
        return EXIT_BAD_INPUT
    if isinstance(exc, (GymMetricsError, OSError)):
        print(f"error: {exc}", file=sys.stderr)
        return exit_code(exc)
    print(f"error: {type(exc).__name__}: {exc} (internal error; --debug shows the traceback)", file=sys.stderr)
    return EXIT_FAILED


def exit_code(exc: BaseException) -> int:
    code = getattr(exc, "exit_code", None)
    if isinstance(code, int):
        return code
    client = sys.modules.get("gym_metrics._transport._client")  # loaded only if a command used it
    if client is not None and isinstance(exc, client.ServerUnavailableError):
        return EXIT_UNAVAILABLE
    return EXIT_BAD_INPUT


def print_invalid(exc: InvalidInputError) -> None:
    if len(exc.violations) <= 1:  # one line: the message, and where
        where = f": {exc.violations[0]}" if exc.violations else ""
        print(f"error: {exc.message}{where}", file=sys.stderr)
        return
    print(f"error: {exc.message}", file=sys.stderr)
    for v in exc.violations[:SHOW_VIOLATIONS]:
        print(f"  {v}", file=sys.stderr)
    if len(exc.violations) > SHOW_VIOLATIONS:
        print(f"  ... and {len(exc.violations) - SHOW_VIOLATIONS} more", file=sys.stderr)
