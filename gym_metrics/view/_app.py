"""The viewer's HTTP face: an ASGI app (no framework) with the page, its script and style, and
a JSON API over the runs. GET only; a request from a page of another site is refused by its Host
(so a web page cannot read these files through DNS rebinding); every answer carries a content
security policy that allows the page's own script and nothing else, so no text of a row can
run, and nothing leaves for another server."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Sequence
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl

import orjson

from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.view import _query
from gym_metrics.view._compare import side_by_side
from gym_metrics.view._index import BLOCK_BYTES
from gym_metrics.view._results import ResultsFile
from gym_metrics.view._rollout import plain, rollout
from gym_metrics.view._runs import Run

Scope = dict[str, Any]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]

POLL_S = 0.5
"""How often the files are looked at again for new rows (a collect in progress)."""
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")  # fmt: skip
_STATIC = {"/": ("index.html", "text/html; charset=utf-8"), "/app.js": ("app.js", "text/javascript; charset=utf-8"),
           "/app.css": ("app.css", "text/css; charset=utf-8")}  # fmt: skip


class _HttpError(Exception):
    def __init__(self, status: int, message: str, violations: Sequence[FieldViolation] = ()) -> None:
        super().__init__(message)
        self.status, self.violations = status, violations


class Follower:
    """Indexes every run in a background thread, a block per run in turn (so each opens at
    once), then looks for new rows every POLL_S until stopped."""

    def __init__(self, runs: Sequence[Run]) -> None:
        self.runs = runs
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gym-metrics-view-index", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            grew = False
            for run in self.runs:
                if run.index is not None and not self._stop.is_set():
                    before = run.index.snapshot.size
                    try:
                        grew |= run.index.refresh(max_bytes=BLOCK_BYTES).size != before
                        run.index.error = ""
                    except Exception as exc:  # noqa: BLE001 - one unreadable file must not stop the others
                        run.index.error = f"{type(exc).__name__}: {exc}"
            if not grew:
                self._stop.wait(POLL_S)


class ViewerApp:
    """The ASGI app over `runs`; `hosts` are the Host names a request may carry."""

    def __init__(self, runs: Sequence[Run], hosts: Sequence[str]) -> None:
        self.runs = list(runs)
        self.hosts = {h.lower() for h in hosts}
        self.follower = Follower(self.runs)
        static = resources.files("gym_metrics.view") / "static"
        self.static = {path: ((static / name).read_bytes(), kind) for path, (name, kind) in _STATIC.items()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        try:
            self._check_request(scope)
            path = scope["path"]
            if path in self.static:
                body, kind = self.static[path]
                await _answer(send, 200, body, kind, head=scope["method"] == "HEAD")
                return
            if not path.startswith("/api/"):
                raise _HttpError(404, f"no page {path[:100]!r}")
            params = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))
            result = await asyncio.to_thread(self._api, path[5:].strip("/").split("/"), params)
            await _answer(send, 200, _json(result), "application/json")
        except _HttpError as exc:
            await _error(send, exc.status, str(exc), exc.violations)
        except InvalidInputError as exc:
            await _error(send, 400, str(exc), exc.violations)
        except LookupError as exc:
            await _error(send, 404, str(exc.args[0]) if exc.args else "not found")

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.follower.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await asyncio.to_thread(self.follower.stop)
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _check_request(self, scope: Scope) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            raise _HttpError(405, "the viewer only reads: GET")
        host = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"), "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if name.lower().strip("[]") not in self.hosts:
            raise _HttpError(403, f"Host {host[:100]!r} is not this viewer's (start it with --host NAME to serve that name)")

    def _run(self, ident: str) -> Run:
        number = _number(ident, "run")
        if number >= len(self.runs):
            raise LookupError(f"no run {ident[:20]!r}; runs: 0..{len(self.runs) - 1}")
        return self.runs[number]

    def _api(self, parts: list[str], params: dict[str, str]) -> Any:
        match parts:
            case ["runs"]:
                return {"runs": [self._summary(i, run) for i, run in enumerate(self.runs)]}
            case ["runs", ident]:
                run = self._run(ident)
                out = self._summary(int(ident), run)  # (_run checked it)
                if run.index is None:  # a metrics file alone: shown whole (a run page polls this: its key metrics are in the summary)
                    out["metrics"] = run.metrics()
                else:
                    out["bad_lines"] = [{"line": n, "reason": r} for n, r in run.index.snapshot.bad_lines[:100]]
                return out
            case ["runs", ident, "scores"]:
                return self._results_of(ident).page(params, *_paging(params))
            case ["runs", ident, "scores", row]:
                return self._results_of(ident).row(_number(row, "row"))
            case ["runs", ident, "rows"]:
                index = self._rows_of(ident)
                return _query.page(index, index.snapshot, _query.Filter.parse(params), *_paging(params))
            case ["runs", ident, "tasks"]:
                snap = self._rows_of(ident).snapshot
                return _query.tasks(snap, _query.Filter.parse(params), *_paging(params), self._run(ident).zero_agents(snap))
            case ["runs", ident, "rollouts", line]:
                return rollout(self._rows_of(ident), _number(line, "line"))
            case ["compare"]:
                a, b = self._rows_of(params.get("a", "")), self._rows_of(params.get("b", ""))
                sa, sb = a.snapshot, b.snapshot
                agent_a = params.get("agent_a") or (sa.agents[0] if sa.agents else "")
                agent_b = params.get("agent_b") or (sb.agents[0] if sb.agents else "")
                zero_a, zero_b = self._run(params["a"]).zero_agents(sa), self._run(params["b"]).zero_agents(sb)
                return {"agent_a": agent_a, "agent_b": agent_b, **side_by_side(sa, agent_a, sb, agent_b, zero_a, zero_b)}
        raise LookupError(f"no API {'/'.join(parts)[:100]!r}")

    def _results_of(self, ident: str) -> ResultsFile:
        run = self._run(ident)
        if run.results is None:
            raise LookupError(f"run {ident} is not a scorer results file")
        return run.results

    def _rows_of(self, ident: str) -> Any:
        run = self._run(ident)
        if run.index is None:
            raise LookupError(f"run {ident} is a metrics file without rollouts")
        return run.index

    def _summary(self, i: int, run: Run) -> dict[str, Any]:
        out: dict[str, Any] = {"id": i, "name": run.name, "metrics_file": run.metrics_path.name if run.metrics_path and run.metrics_path.is_file() else None}
        if run.results is not None:
            try:
                return {**out, "kind": "results", "agents": [], **run.results.summary()}
            except (InvalidInputError, OSError) as exc:  # one bad file does not hide the others
                return {**out, "kind": "results", "agents": [], "rows": 0, "error": str(exc)}
        metrics, problem = run.metrics(), None
        try:
            key_metrics = _key_metrics(metrics)
        except InvalidInputError as exc:  # one bad metrics file does not hide the other runs
            key_metrics, problem = {}, f"{run.metrics_path.name if run.metrics_path else 'metrics'}: {exc}"
        if isinstance(metrics, dict) and isinstance(metrics.get("error"), str):  # unreadable: Run.metrics says why
            problem = metrics["error"]
        if run.index is None:
            return {**out, "kind": "metrics", "rows": 0, "agents": [], "key_metrics": key_metrics, "error": problem}
        snap = run.index.snapshot
        error = "; ".join(e for e in (run.index.error, problem) if e) or None
        return {**out, "kind": "rollouts", "path": str(run.index.path), "rows": len(snap.columns), "lines": snap.lines, "bytes": snap.size,
                "file_size": snap.file_size, "bad_lines_count": snap.bad_count, "error": error, "agents": _query.agents(snap, run.zero_agents(snap)),
                "key_metrics": key_metrics}  # fmt: skip


def _key_metrics(metrics: Any) -> dict[str, Any]:
    """Per agent of a metrics file, its key metrics (what NeMo Gym's get_key_metrics chose);
    InvalidInputError naming the agent whose key metrics nest too deep to show."""
    if not isinstance(metrics, list):
        return {}
    out = {}
    for entry in metrics:
        if isinstance(entry, dict) and isinstance(entry.get("agent_ref"), dict):
            name = str(entry["agent_ref"].get("name"))
            try:
                out[name] = plain(entry.get("key_metrics") or {})
            except InvalidInputError as exc:
                raise InvalidInputError(f"key_metrics of agent {name[:100]!r}: {exc}") from None
    return out


def _number(text: str, what: str) -> int:
    """A number in the path: ASCII digits only (str.isdigit also takes "²", which int refuses),
    at most 18 (int refuses past 4,300; the index holds 64-bit numbers); else 404 naming it."""
    if not (0 < len(text) <= 18 and text.isascii() and text.isdigit()):
        raise LookupError(f"no {what} {text[:20]!r}: a {what} is numbered in ASCII digits, at most 18")
    return int(text)


def _paging(params: dict[str, str]) -> tuple[int, int]:
    try:
        return int(params.get("offset") or 0), int(params.get("limit") or 50)
    except ValueError:
        raise InvalidInputError("bad page", [FieldViolation("offset/limit", "not an integer")]) from None


async def _answer(send: Send, status: int, body: bytes, kind: str, head: bool = False) -> None:
    headers = [(b"content-type", kind.encode()), (b"content-length", str(len(body)).encode()),
               (b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
               (b"referrer-policy", b"no-referrer"), (b"cache-control", b"no-store")]  # fmt: skip
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else body})


async def _error(send: Send, status: int, message: str, violations: Sequence[FieldViolation] = ()) -> None:
    body = {"error": message, "violations": [{"field": v.field, "reason": v.description} for v in violations]}
    await _answer(send, status, orjson.dumps(body), "application/json")


def _json(value: Any) -> bytes:
    """An answer's JSON; a row holding a lone surrogate (an emoji cut in half), which orjson
    refuses, goes with it escaped (`\\udXXX`, valid JSON the page reads), not as a 500."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)
    except TypeError:
        return json.dumps(value, default=lambda v: v.tolist()).encode()
