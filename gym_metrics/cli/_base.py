"""What every `gym-metrics` command shares: the argument parser and its value types, the exit
code of an error (the table is `gym_metrics.errors.ExitCode`), logging set-up, one-line error
messages, bearer tokens from the environment, tables (DESIGN "Command-line conventions")."""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from gym_metrics._util.masking import MaskingFilter, without_userinfo
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

MAX_COUNT = 2**63 - 1
"""The largest number any count flag takes (a C long, numpy's and protobuf's int64, islice's
stop): a larger one failed deep inside as an internal error. Flags with a real bound say theirs."""


def server_address(text: str) -> str:
    """A gRPC server to call: HOST:PORT (port 1..65535; `[v6]:PORT`), or a target grpc
    resolves itself (`dns:///NAME:PORT`, `ipv4:`, `ipv6:`, `unix:`). A port out of range was
    wrapped by the resolver (98743 reached 33207) and a URL failed as "unreachable". The value
    is quoted back with any user and password masked."""
    if text.startswith(("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:")):
        return text
    if "://" in text:
        raise argparse.ArgumentTypeError(f"{without_userinfo(text)!r}: give HOST:PORT (a gRPC address, not a URL)")
    host, sep, port = text.rpartition(":")
    if "@" in host:
        raise argparse.ArgumentTypeError(f"{without_userinfo(text)!r}: give HOST:PORT, no user or password (a token: --auth-token-env)")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{without_userinfo(text)!r}: give HOST:PORT with a port in 1..65535")
    return text


def listen_host(text: str) -> str:
    """A server's --host: a name or address of this machine to listen on, never a URL (quoted
    back with any user and password masked)."""
    if "://" in text or "@" in text or "/" in text or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(f"{without_userinfo(text)!r}: give a host name or address to listen on (not a URL)")
    return text


def _shown(text: str) -> str:
    """A number as given, cut when long (a 10,000-digit value is not quoted back whole)."""
    text = text.strip()
    return text if len(text) <= 24 else f"{text[:12]}...({len(text)} digits)"


def bounded_int(text: str, low: int, high: int, why: str = "") -> int:
    """`text` as an int in low..high; argparse.ArgumentTypeError saying the bound (and `why`)."""
    value = int(text)
    if value < low:
        raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
    if value > high:
        raise argparse.ArgumentTypeError(f"must be at most {high:,}{why}, got {_shown(text)}")
    return value


def int_in(low: int, high: int, why: str = "") -> Callable[[str], int]:
    """An argparse type: an int in low..high (`why`, e.g. " (each holds ...)", ends the message)."""

    def parse(text: str) -> int:
        return bounded_int(text, low, high, why)

    parse.__name__ = "int"  # (argparse's "invalid int value: 'x'")
    return parse


def positive_int(text: str) -> int:
    return bounded_int(text, 1, MAX_COUNT)


def non_negative_int(text: str) -> int:
    return bounded_int(text, 0, MAX_COUNT)


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


MAX_GRACE_S = 3600.0
"""The most seconds a server's --grace may give in-flight calls at SIGTERM."""


def grace_seconds(text: str) -> float:
    """--grace of `serve` and `jobs serve`: seconds, 0..MAX_GRACE_S (nan and inf refused)."""
    value = float(text)
    if not 0 <= value <= MAX_GRACE_S:
        raise argparse.ArgumentTypeError(f"must be a number of seconds in 0..{MAX_GRACE_S:g}, got {text}")
    return value


def max_local_processes() -> int:
    """The most processes a command may start on this machine (collect --processes, serve
    --workers): 4 a core (more only add memory and switching), at least 8."""
    return max(8, 4 * (os.cpu_count() or 1))


def require_module(module: str, flag: str, extra: str, what: str) -> None:
    """GymMetricsError (exit 2, before any work) when `flag` needs `module`, an optional extra
    not installed: one line saying what to install."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise GymMetricsError(f"{flag} needs {what}, which is not installed: pip install 'gym-metrics[{extra}]'")


def reducer_name(text: str) -> str:
    """--reducer / --reducers: a reducer's name; a family member's k checked here (pass@k: k
    at most gym_metrics._util.registry.MAX_K). An unknown name is left to the command, which
    lists the known ones."""
    from gym_metrics.reducers import REDUCERS

    try:
        REDUCERS.find(text)
    except InvalidInputError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None
    except GymMetricsError:  # a plugin that fails to load: the command reports it
        pass
    return text


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
