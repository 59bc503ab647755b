"""A scripted OpenAI-compatible chat-completions server, so judge tests need no model.

Standard library only (so a nemo-gym venv can load this file alone), and loopback only.
`with ScriptedChatServer([...]) as judge:` serves POST /v1/chat/completions and POST
/v1/responses on 127.0.0.1 (port 0, read back) from a thread. Each request takes the next
scripted item (then `default`, if given):
- a str: a 200 chat completion (a Responses API answer on /v1/responses) with that text;
- a `Reply(status, body, headers)`: that raw HTTP answer (errors, Retry-After, junk);
- a `Stall(seconds)`: wait that long before answering 200 "stalled" (for timeouts);
- a callable(body: dict) -> one of the above: chosen from the request (for concurrent calls,
  whose arrival order is not fixed).
A request with the script exhausted and no `default` gets HTTP 500 "script exhausted", so a
test that sends more than it scripted fails instead of hanging. `keyed_answers(...)` is a
callable item answering by the request's text (same text, same answer, in any order or run). Every request is recorded (path, headers,
parsed JSON body) in `judge.requests`. `LoopbackServer` is the machinery (thread, recording,
in-flight count) that the scripted policy server (`_policy.py`) shares.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar, Union


@dataclass
class Reply:
    """A raw HTTP answer: status, body, headers (errors, Retry-After, junk)."""

    status: int = 200
    body: str | bytes = ""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Stall:
    """Wait `seconds` before answering 200 "stalled" (for client timeouts)."""

    seconds: float


Item = Union[str, Reply, Stall, Callable[[dict[str, Any]], Any]]


@dataclass
class Recorded:
    """One request the server received: path, headers and parsed JSON body."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    def header(self, name: str) -> str | None:
        """A request header, by case-insensitive name."""
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)

    @property
    def text(self) -> str:
        """All message texts of the request, joined (what the judge was shown)."""
        return request_text(self.body)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def request_text(body: dict[str, Any]) -> str:
    """The message texts of a chat (`messages`) or Responses (`input`) request, one per line."""
    given = body.get("messages", body.get("input", []))
    if isinstance(given, str):
        return given
    items = given if isinstance(given, list) else []
    return "\n".join(_content_text(m.get("content")) for m in items if isinstance(m, dict))


def text_key(text: str) -> str:
    """The sha256 (hex) of a request's text: what `keyed_answers` keys on."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def keyed_answers(
    answers: Sequence[str], *, fail_keys: Iterable[str] = (), fail_status: int = 500
) -> Callable[[dict[str, Any]], Union[str, Reply]]:
    """A scripted item answering by the request's text: HTTP `fail_status` when its `text_key`
    is one of `fail_keys`, else `answers[int(text_key, 16) % len(answers)]`."""
    failing = frozenset(fail_keys)

    def answer(body: dict[str, Any]) -> Union[str, Reply]:
        key = text_key(request_text(body))
        if key in failing:
            return Reply(fail_status, f"injected {fail_status}")
        return answers[int(key, 16) % len(answers)]

    return answer


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out and left is expected here, not a failure


def completion(content: str, model: str = "scripted") -> bytes:
    """The JSON body of a 200 chat completion whose message content is `content`."""
    return json.dumps(
        {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        }
    ).encode()


def response_object(content: str, model: str = "scripted") -> bytes:
    """The JSON body of a 200 Responses API answer: one assistant message with `content`."""
    message = {
        "type": "message", "id": "msg-test", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": content, "annotations": []}],
    }  # fmt: skip
    return json.dumps(
        {
            "id": "resp-test", "object": "response", "created_at": 0, "model": model, "status": "completed",
            "output": [message], "parallel_tool_calls": False, "tool_choice": "auto", "tools": [],
        }  # fmt: skip
    ).encode()


_BODIES = {"/v1/chat/completions": completion, "/v1/responses": response_object}


_S = TypeVar("_S", bound="LoopbackServer")


class LoopbackServer:
    """Base of the scripted servers: a threaded HTTP/1.1 server on 127.0.0.1 (port 0, read
    back) that records every POST (`requests`), counts the requests answered at once
    (`max_in_flight`) and asks the subclass what to answer: `_take(request)` under the lock
    (pick the scripted item), then `_reply(item, request)` outside it (may sleep)."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.in_flight = 0
        self.max_in_flight = 0
        """Most requests being answered at the same time (to check bounded concurrency)."""
        self.errors: list[Exception] = []
        """What the script raised answering a request (each answered as a 500 naming it)."""
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real server (and pooling) does

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def setup(self) -> None:
                super().setup()  # headers and body go out in two writes: no Nagle delay
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                request = Recorded(self.path, dict(self.headers.items()), body)
                with server._lock:
                    server.requests.append(request)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    try:
                        item, failed = server._take(request), None
                    except Exception as exc:
                        item, failed = None, exc
                try:
                    try:
                        if failed is not None:
                            raise failed
                        reply = server._reply(item, request)
                    except Exception as exc:  # the test's own script is wrong: said, not a dropped connection
                        server.errors.append(exc)
                        reply = Reply(500, f"scripted server error: {type(exc).__name__}: {exc}")
                    self._send(reply)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _send(self, reply: Reply) -> None:
                payload = reply.body.encode() if isinstance(reply.body, str) else reply.body
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        # http.server listens with a backlog of 5: a client opening many connections at once
        # (collect's concurrent verifies, each calling a judge) would see resets. Linux takes a new backlog.
        self._server.socket.listen(1024)
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def _take(self, request: Recorded) -> Any:
        """The item answering `request` (called under the lock, in arrival order)."""
        raise NotImplementedError

    def _reply(self, item: Any, request: Recorded) -> Reply:
        """The HTTP answer for `item` (called outside the lock: may sleep)."""
        raise NotImplementedError

    def __enter__(self: _S) -> _S:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._thread.is_alive():  # (shutdown waits for a serve_forever that never ran otherwise)
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()


class ScriptedChatServer(LoopbackServer):
    """See the module docstring. `url` is the base URL to put in a judge's config."""

    def __init__(self, script: Iterable[Item] = (), *, default: Item | None = None) -> None:
        super().__init__()
        self.script: list[Item] = list(script)
        self.default = default
        """The item answering every request once the script is exhausted (None: HTTP 500)."""

    def _take(self, request: Recorded) -> Any:
        if self.script:
            return self.script.pop(0)
        return self.default if self.default is not None else Reply(500, "script exhausted")

    def _reply(self, item: Any, request: Recorded) -> Reply:
        if callable(item):
            item = item(request.body)
        if isinstance(item, Stall):
            time.sleep(item.seconds)
            item = "stalled"
        body = _BODIES.get(request.path)
        if body is None:
            return Reply(404, f"no route {request.path}")
        if isinstance(item, str):
            item = Reply(200, body(item), {"Content-Type": "application/json"})
        return item

    def add(self, *items: Item) -> None:
        """Append items to the script."""
        with self._lock:
            self.script.extend(items)

    @property
    def remaining(self) -> int:
        """Scripted items not answered yet."""
        with self._lock:
            return len(self.script)


ScriptedJudge = ScriptedChatServer
"""The name our tests first knew it by."""
