"""What every `gym-metrics` command shares: the argument parser and its value types, the exit
code of an error (the table is `gym_metrics.errors.ExitCode`), logging set-up, one-line error
messages, bearer tokens from the environment, tables (DESIGN "Command-line conventions")."""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from gym_metrics._util.masking import MaskingFilter
from gym_metrics._util.atomic import same_file
from gym_metrics.errors import ExitCode, GymMetricsError, InvalidInputError, UserCodeError

SHOW_VIOLATIONS = 20
THIRD_PARTY_LOGGERS = ("asyncio", "grpc", "h11", "h2", "hpack", "httpcore", "httpx", "jinja2", "openai", "urllib3")
"""Kept at WARNING unless --log-level debug: an INFO line per HTTP request is noise."""


class InputFileError(GymMetricsError):
    """The input file named on the command line is missing or not a file."""


class ArgParser(argparse.ArgumentParser):
    """No abbreviations (`--num-repeat` is not `--num-repeats`), and an unknown flag is named
    in one line (with the closest known flag), before any missing required one (argparse
    reports those first). Subparsers are made of the
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
        # One line, not the usage first: the hint is what matters (the usage is one --help away).
        self.exit(ExitCode.BAD_INPUT, f"{self.prog}: error: unrecognized arguments: {' '.join(hints)}; see {self.prog} --help\n")


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
    for handler in logging.getLogger().handlers:  # keys never reach a log line, debug included
        if not any(isinstance(f, MaskingFilter) for f in handler.filters):
            handler.addFilter(MaskingFilter())
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
        return ExitCode.BAD_INPUT
    if isinstance(exc, (GymMetricsError, OSError)):
        print(f"error: {exc}", file=sys.stderr)
        return exit_code(exc)
    if isinstance(exc, UserCodeError):  # the environment's own code: its hook named, not ours
        print(f"error: {exc} (the environment's code; --debug shows the traceback)", file=sys.stderr)
        return ExitCode.FAILED
    print(f"error: {type(exc).__name__}: {exc} (internal error; --debug shows the traceback)", file=sys.stderr)
    return ExitCode.FAILED


def exit_code(exc: BaseException) -> int:
    """The error's own `exit_code` (e.g. ExitCode.UNAVAILABLE: the server is unreachable), else BAD_INPUT."""
    code = getattr(exc, "exit_code", None)
    return code if isinstance(code, int) else ExitCode.BAD_INPUT


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


# ----------------------------------------------------------------------------- value types

def server_address(text: str) -> str:
    """A gRPC server to call: HOST:PORT (port 1..65535; `[v6]:PORT`), or a target grpc
    resolves itself (`dns:///NAME:PORT`, `ipv4:`, `ipv6:`, `unix:`). A port out of range was
    wrapped by the resolver (98743 reached 33207) and a URL failed as "unreachable"."""
    if text.startswith(("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:")):
        return text
    if "://" in text:
        raise argparse.ArgumentTypeError(f"{text!r}: give HOST:PORT (a gRPC address, not a URL)")
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: give HOST:PORT with a port in 1..65535")
    return text


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def agent_name(text: str) -> str:
    """--agent: a non-empty agent name."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must be a non-empty agent name")
    return text


# ----------------------------------------------------------------------------- shared helpers


def refuse_output_over_input(outputs: dict[str, Any], inputs: Sequence[Path]) -> None:
    """Refuse, before anything is read or written, an output that is one of the inputs:
    writing it would destroy the input (aggregate -o, --partial-out, merge -o, collect --output)."""
    for flag, out in outputs.items():
        for path in inputs:
            if isinstance(out, Path) and same_file(out, path):
                raise InvalidInputError(f"{flag} {out} is the input {path}: writing it would overwrite the input; name another file")


def read_token(var: str | None, flag: str = "--auth-token-env") -> str | None:
    """The bearer token in environment variable `var` (None when no variable is named); a
    named variable that is unset or empty is an error, never a silent unauthenticated call."""
    if not var:
        return None
    token = (os.environ.get(var) or "").strip()  # a secret mounted from a file ends with its newline
    if not token:
        raise GymMetricsError(f"{flag} {var}: the variable is not set or empty")
    if not all(" " <= c <= "~" for c in token):  # what a gRPC or HTTP header can carry
        raise InvalidInputError(f"{flag} {var}: the token holds characters a header cannot carry (only printable ASCII)")
    return token


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """Plain-text columns, a dashed line under the header."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def format_key_metrics(by_agent: dict[str, dict[str, Any]]) -> str:
    """One row per agent, one column per key metric."""
    columns: list[str] = []
    for metrics in by_agent.values():
        columns += [k for k in metrics if k not in columns]
    rows = [[name, *(fmt(by_agent[name].get(c)) for c in columns)] for name in sorted(by_agent)]
    return format_table(["agent", *columns], rows)


def print_value_notes(results: Any) -> None:
    """Values the stats left out, per agent and field, on stderr: nothing is dropped silently."""
    for r in results:
        for counts, what in (
            (r.non_finite_counts, "non-finite values"),
            (r.non_numeric_counts, "non-numeric values (text, objects, lists, integers past a float; never converted)"),
        ):
            if counts:
                listed = ", ".join(f"{k}: {v}" for k, v in counts.items())
                print(f"note: {r.agent_name}: {what} left out of the stats ({listed})", file=sys.stderr)
        metrics = r.agent_metrics
        for key, used in metrics.items():  # a reducer that dropped every task: its 0.0 is no score
            if key.endswith("/tasks_used") and used == 0 and metrics.get(f"{key[: -len('/tasks_used')]}/tasks_dropped"):
                name = key[: -len("/tasks_used")]
                print(f"note: {r.agent_name}: {name} has no estimate: all {metrics[f'{name}/tasks_dropped']} tasks were dropped "
                      f"(fewer samples than it needs: --num-repeats); its 0.0 is not a score", file=sys.stderr)  # fmt: skip


AUTH_TOKEN_ENV = "GYM_METRICS_AUTH_TOKEN"
"""Where `serve` and `jobs serve` read their bearer token from when no --auth-token-env names one."""


def add_access_flags(p: argparse.ArgumentParser) -> None:
    """Who may call a server: --auth-token-env, --tls-cert, --tls-key (serve and jobs serve)."""
    p.add_argument(
        "--auth-token-env", metavar="VAR",
        help=f"require `authorization: Bearer $VAR` on every call but health and reflection (default: {AUTH_TOKEN_ENV} if set)",
    )  # fmt: skip
    p.add_argument("--tls-cert", type=Path, help="PEM certificate chain (enables TLS with --tls-key)")
    p.add_argument("--tls-key", type=Path, help="PEM private key")


def server_token(ns: argparse.Namespace) -> str | None:
    """The bearer token a server requires: from --auth-token-env, else AUTH_TOKEN_ENV if set."""
    return read_token(ns.auth_token_env or (AUTH_TOKEN_ENV if os.environ.get(AUTH_TOKEN_ENV) else None))


def warn_bad_lines(path: Path, bad_lines: Sequence[Any]) -> None:
    """What `--on-bad-line skip` left out of `path`, on stderr (the first SHOW_VIOLATIONS)."""
    for bad in bad_lines[:SHOW_VIOLATIONS]:
        print(f"warning: skipped {path}:{bad}", file=sys.stderr)
    if len(bad_lines) > SHOW_VIOLATIONS:
        print(f"warning: ... and {len(bad_lines) - SHOW_VIOLATIONS} more bad lines in {path}", file=sys.stderr)
