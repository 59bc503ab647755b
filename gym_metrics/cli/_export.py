"""`--export NAME[=TARGET]` on `collect` and `aggregate`: the flag, the up-front check that
each exporter's extra is installed (exit 2 before any work), and the exports after the
metrics file is written (a failing export never loses the file: exit 1, file kept)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gym_metrics._util.masking import scrub, url_password, without_url_credentials, without_userinfo
from gym_metrics.cli._base import positive_float
from gym_metrics.errors import ExitCode, FieldViolation, InvalidInputError

PUSH_INTERVAL_S = 10.0
"""Seconds between pushes to the Pushgateway when --push-interval is not given."""
EXPORT_HELP = (
    "after writing the metrics, export them: mlflow[=TRACKING_URI], wandb[=PROJECT], "
    "tensorboard[=DIR] (repeatable; each needs its extra, e.g. pip install 'gym-metrics[mlflow]')"
)


def export_spec(text: str) -> tuple[str, str | None]:
    """`NAME[=TARGET]` -> (name, target); an unknown name is a usage error."""
    from gym_metrics.exporters import exporter_names

    name, sep, target = text.partition("=")
    known = exporter_names()
    if name not in known:
        raise argparse.ArgumentTypeError(f"unknown exporter {name!r}; known: {', '.join(known)}")
    if sep and not target:
        raise argparse.ArgumentTypeError(f"{name}= needs a value after '=' (or drop the '=')")
    return name, target or None


def add_export_flags(p: argparse.ArgumentParser) -> None:
    """Adds --export; call after the command's set_defaults (it chains their check_inputs)."""
    p.add_argument("--export", action="append", type=export_spec, default=[], metavar="NAME[=TARGET]", help=EXPORT_HELP)
    earlier = p.get_default("check_inputs")

    def check(ns: argparse.Namespace) -> None:
        check_exporters(ns)
        if earlier is not None:
            earlier(ns)

    p.set_defaults(check_inputs=check)


def pushgateway_url(text: str) -> str:
    """--pushgateway: an http(s) URL, or HOST[:PORT] (http:// then), checked before any work
    (a bad one failed the push after the whole run); quoted back with its password masked."""
    from urllib.parse import urlsplit

    shown = without_userinfo(text)
    try:
        parts = urlsplit(text if "://" in text else f"http://{text}")
        parts.port  # noqa: B018  # raises ValueError for a bad port
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shown!r}: not a URL (a bad port?); give http[s]://HOST[:PORT]") from None
    if parts.scheme not in ("http", "https"):
        raise argparse.ArgumentTypeError(f"{shown!r}: the Pushgateway is reached over http:// or https://, not {parts.scheme}://")
    if not parts.hostname or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(f"{shown!r}: not a URL; give http[s]://HOST[:PORT]")
    return text


def add_pushgateway_flag(p: argparse.ArgumentParser) -> None:
    """Adds --pushgateway; call after set_defaults (it chains their check_inputs)."""
    p.add_argument(
        "--pushgateway", metavar="URL", type=pushgateway_url,
        help="push the collector's counters to this Prometheus Pushgateway (http[s]://HOST[:PORT]) every --push-interval s and at the end "
        "(job gym_metrics_collect, instance = the output's stem; needs the prometheus extra)",
    )  # fmt: skip
    p.add_argument("--push-interval", type=positive_float, metavar="S", help=f"with --pushgateway: seconds between pushes ({PUSH_INTERVAL_S:g})")
    earlier = p.get_default("check_inputs")

    def check(ns: argparse.Namespace) -> None:
        if ns.push_interval is not None and not ns.pushgateway:  # (it paced no push, silently)
            raise InvalidInputError("--push-interval paces the pushes to a Pushgateway", [FieldViolation("--pushgateway", "not given")])
        if ns.pushgateway:
            from gym_metrics.exporters import Pusher

            Pusher.check_installed()
        if earlier is not None:
            earlier(ns)

    p.set_defaults(check_inputs=check)


def check_exporters(ns: argparse.Namespace) -> None:
    """ExporterMissingError (exit 2) naming `pip install 'gym-metrics[extra]'`."""
    wanted = getattr(ns, "export", None) or []
    if not wanted:
        return  # the exporters (and the entry-point scan) are not imported for nothing
    from gym_metrics.exporters import get_exporter

    for name, _ in wanted:
        get_exporter(name).check_installed()


def export_after(ns: argparse.Namespace, metrics_path: Path | None, code: int, *, resume: bool = False) -> int:
    """Run every --export on the written metrics file; the command's exit code, or 1 when an
    export failed and the command had none of its own (each failure is one stderr line)."""
    specs = getattr(ns, "export", None) or []
    if not specs or metrics_path is None or not Path(metrics_path).is_file():
        return code
    from gym_metrics.exporters import get_exporter, load_run

    run = load_run(Path(metrics_path), resume=resume, report=_report_path(ns, Path(metrics_path)))
    failed = False
    for name, target in specs:
        try:
            where = get_exporter(name)(target).export(run)
            print(f"exported -> {without_url_credentials(str(where))}")
        except Exception as exc:  # the metrics file is written: report and go on
            failed = True
            print(f"error: export {name} failed ({type(exc).__name__}: {_one_line(exc, target)}); "
                  f"the metrics file is kept: {metrics_path}", file=sys.stderr)  # fmt: skip
    return code or (ExitCode.FAILED if failed else ExitCode.OK)


def _report_path(ns: argparse.Namespace, metrics_path: Path) -> Path | None:
    """The HTML report written beside the metrics (`--report`), when there is one."""
    given: Any = getattr(ns, "report", None)
    stem = metrics_path.stem.removesuffix("_aggregate_metrics")
    candidates = [given] if isinstance(given, (str, Path)) else []
    if given:
        candidates += [metrics_path.with_name(f"{stem}_report.html"), metrics_path.with_suffix(".html")]
    return next((Path(c) for c in candidates if Path(c).is_file()), None)


def _one_line(exc: BaseException, target: str | None) -> str:
    """The error on one line, a URL's credentials and the target's password masked before it is
    cut (a cut first could leave a long password's start unmasked)."""
    text = scrub(without_url_credentials(" ".join(str(exc).split())), url_password(target))
    return text[:300] + ("..." if len(text) > 300 else "")
