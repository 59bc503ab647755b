"""The HTTP doors (`serve --http-port`, `--agent-http-port`; _transport/server/_http.py) given
bad input: each refusal is its HTTP status and a JSON `{"error": ...}` naming what is wrong,
never a traceback; a route's own failure is answered by its kind (the server's 503, a bug's
500 without its details, which go to the log)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import httpx
import pytest

from gym_metrics.errors import GymMetricsError
from gym_metrics.testing import serve_environment

pytestmark = pytest.mark.timeout(60)

JSON = {"content-type": "application/json"}


async def test_bad_requests_to_the_reward_door_are_refused_naming_what_is_wrong() -> None:
    async with serve_environment("math_exact", http_port=0) as server:
        url = f"http://127.0.0.1:{server.http_port}/score_groups"
        async with httpx.AsyncClient(timeout=20) as http:
            answers = [
                await http.get(url),
                await http.post(url, content=b"[1, 2]", headers=JSON),
                await http.post(url, content=b"{nope", headers=JSON),
                await http.post(url, json={"groups": {"row": {}, "completions": []}}),
                await http.post(url, json={"groups": [{"row": {}, "completions": []}, 5]}),
                await http.post(url, json={"groups": [{"row": {}, "completions": "4"}]}),
            ]
            still = await http.post(url, json={"groups": [{"row": {"expected_answer": "4"}, "completions": [{"content": "4"}]}]})
    assert [a.status_code for a in answers] == [405, 400, 400, 400, 400, 400]
    errors = [a.json()["error"] for a in answers]
    assert errors[0] == "/score_groups takes POST"
    assert errors[1] == "the body must be a JSON object"
    assert errors[2].startswith("the body is not JSON: ") and "line 1 column 2" in errors[2]
    assert errors[3] == "`groups` must be a list of {row, completions}"
    assert errors[4] == errors[5].replace("groups[0]", "groups[1]") == "groups[1] must be an object with `row` and a `completions` list"
    assert still.status_code == 200 and len(still.json()["groups"]) == 1  # the door serves on


async def test_a_routes_failure_is_answered_by_its_kind_and_a_bug_is_logged_not_shown(caplog: pytest.LogCaptureFixture) -> None:
    from gym_metrics._transport.server._http import JsonHttpApp
    from gym_metrics._transport.server._uvicorn import start_uvicorn

    async def unavailable(data: Mapping[str, Any]) -> Any:
        raise GymMetricsError("the environment is shutting down")

    async def buggy(data: Mapping[str, Any]) -> Any:
        raise KeyError("secret-internal-detail")

    async def fine(data: Mapping[str, Any]) -> Any:
        return {"echo": dict(data)}

    app = JsonHttpApp({"/down": unavailable, "/bug": buggy, "/ok": fine}, token=None, max_body_bytes=1 << 20)
    served = await start_uvicorn(app, "127.0.0.1", 0, "--http-port", "http")
    base = f"http://127.0.0.1:{served.port}"
    try:
        with caplog.at_level(logging.ERROR, logger="gym_metrics.http"):
            async with httpx.AsyncClient(timeout=20) as http:
                down = await http.post(f"{base}/down", json={})
                bug = await http.post(f"{base}/bug", json={"a": 1})
                ok = await http.post(f"{base}/ok", json={"a": 1})
    finally:
        await served.stop()
    assert (down.status_code, down.json()) == (503, {"error": "the environment is shutting down"})
    assert (bug.status_code, bug.json()) == (500, {"error": "internal error (KeyError); the server's log has the details"})
    assert (ok.status_code, ok.json()) == (200, {"echo": {"a": 1}})
    logged = [r for r in caplog.records if r.name == "gym_metrics.http"]
    assert len(logged) == 1 and logged[0].getMessage() == "POST /bug failed" and logged[0].exc_info is not None
    assert "secret-internal-detail" in str(logged[0].exc_info[1])
