"""Shared pieces of the job tests: rows, a counting loopback scoring endpoint, remote configs."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from typing import Any

from gym_metrics.testing import LoopbackServer, Recorded, Reply


def tool_row(i: int) -> dict[str, Any]:
    """A tool_call_accuracy row: even rows call a then b (order matters), odd rows call a only."""
    calls = [{"name": "a", "args": {"x": i}}] + ([{"name": "b", "args": {}}] if i % 2 == 0 else [])
    reference = [{"name": "a", "args": {"x": i if i % 3 else -1}}, {"name": "b", "args": {}}]
    return {"user_input": [{"content": "", "type": "ai", "tool_calls": calls}], "reference_tool_calls": reference}


class CountingEndpoint(LoopbackServer):
    """`{"id": N}` in, `{"score": N / 10}` out after `delay` seconds; counts requests per id
    (a file too, when given, so a test outlives a killed client). `fail` ids get HTTP 400."""

    def __init__(self, delay: float = 0.0, fail: bool = False, log_path: str | None = None) -> None:
        super().__init__()
        self.delay, self.fail, self.log_path = delay, fail, log_path
        self.calls: Counter[int] = Counter()
        self._count_lock = threading.Lock()

    def _take(self, request: Recorded) -> Any:
        return request.body.get("id")

    def _reply(self, item: Any, request: Recorded) -> Reply:
        with self._count_lock:
            self.calls[int(item)] += 1
        if self.delay:
            time.sleep(self.delay)
        if self.fail:
            return Reply(400, "bad row", {"Content-Type": "text/plain"})
        return Reply(200, json.dumps({"score": int(item) / 10}), {"Content-Type": "application/json"})


def remote_config(url: str, **over: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "type": "remote", "url": url + "/score", "body": {"id": "{{ item.id }}"},
        "scores": [{"name": "score", "parser": {"type": "json", "json_path": "$.score"}}],
        "max_retries": 0, "backoff_seconds": 0.001, "max_backoff_seconds": 0.01,
    }  # fmt: skip
    config.update(over)
    return config
