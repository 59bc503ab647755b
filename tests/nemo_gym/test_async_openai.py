"""`openai_utils.NeMoGymAsyncOpenAI` (the client NeMo Gym's agents use to reach an endpoint
directly), against a real HTTP server on loopback answering a script of statuses: the bearer key
and default headers sent, retryable statuses tried again up to `max_http_attempts`, the last one
raised with its body, a refused key tripping every later call without a request, the key kept out
of the client's repr."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from gym_metrics.nemo_gym.openai_utils import NeMoGymAsyncOpenAI, PermanentEndpointError


class Endpoint:
    """Answers each POST with the next (status, body) of `script`, then 200; records requests."""

    def __init__(self, script: list[tuple[int, dict[str, Any]]]) -> None:
        self.script, self.requests = list(script), []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, dict(self.headers), body))
                status, answer = outer.script.pop(0) if outer.script else (200, {"ok": True, "echo": body})
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def endpoint() -> Iterator[Any]:
    made: list[Endpoint] = []

    def make(script: list[tuple[int, dict[str, Any]]]) -> Endpoint:
        made.append(Endpoint(script))
        return made[-1]

    yield make
    for e in made:
        e.server.shutdown()
        e.server.server_close()


def test_a_call_carries_the_key_and_headers_and_retries_what_nemo_gym_retries(endpoint: Any) -> None:
    server = endpoint([(503, {"error": "busy"}), (429, {"error": {"code": "rate_limited"}})])
    client = NeMoGymAsyncOpenAI(base_url=server.url, api_key="sk-secret", default_headers={"x-session-id": "root"})
    answer = asyncio.run(client.create_chat_completion(model="m", messages=[{"role": "user", "content": "hi"}]))
    assert answer == {"ok": True, "echo": {"model": "m", "messages": [{"role": "user", "content": "hi"}]}}
    assert [r[0] for r in server.requests] == ["/v1/chat/completions"] * 3
    assert server.requests[0][1]["Authorization"] == "Bearer sk-secret" and server.requests[0][1]["x-session-id"] == "root"
    assert asyncio.run(client.create_tokenize(prompt="x"))["ok"] and server.requests[-1][0] == "/tokenize"  # beside /v1
    assert "sk-secret" not in repr(client)


def test_the_last_retryable_answer_is_raised_with_its_body(endpoint: Any) -> None:
    server = endpoint([(500, {"error": "down"})] * 2)
    client = NeMoGymAsyncOpenAI(base_url=server.url, api_key="k", max_http_attempts=2)
    with pytest.raises(Exception) as raised:
        asyncio.run(client.create_response(input="x"))
    assert getattr(raised.value, "status", None) == 500 and b"down" in raised.value.response_content  # type: ignore[attr-defined]
    assert len(server.requests) == 2


def test_a_refused_key_stops_every_later_call_without_a_request(endpoint: Any) -> None:
    server = endpoint([(401, {"error": {"code": "invalid_api_key", "message": "bad"}})])
    client = NeMoGymAsyncOpenAI(base_url=server.url, api_key="k")
    for _ in range(2):
        with pytest.raises(PermanentEndpointError, match="HTTP 401 is permanent"):
            asyncio.run(client.create_response(input="x"))
    assert len(server.requests) == 1
    spent = endpoint([(429, {"error": {"type": "insufficient_quota"}})])
    with pytest.raises(PermanentEndpointError, match="HTTP 429"):
        asyncio.run(NeMoGymAsyncOpenAI(base_url=spent.url, api_key="k").create_response(input="x"))
    denied = endpoint([(403, {"error": {"code": "forbidden"}})])  # a one-off denial: raised, not a trip
    client = NeMoGymAsyncOpenAI(base_url=denied.url, api_key="k")
    with pytest.raises(Exception) as raised:
        asyncio.run(client.create_response(input="x"))
    assert not isinstance(raised.value, PermanentEndpointError) and asyncio.run(client.create_response(input="y"))["ok"]
