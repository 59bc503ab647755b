"""`collect --pushgateway URL` against a real `serve`: a loopback HTTP server standing in for
the Pushgateway records what is pushed (periodic pushes while collecting, the final one last)."""

from __future__ import annotations

import base64
import http.server
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from _observability_helpers import need
from _transport_helpers import serve_process
from gym_metrics import resolve_server
from gym_metrics.cli import main


class _Gateway(http.server.BaseHTTPRequestHandler):
    pushes: list[tuple[str, str, str]] = []
    auth: list[str | None] = []
    status = 200

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        self.pushes.append((self.command, self.path, body))
        self.auth.append(self.headers.get("Authorization"))
        self.send_response(self.status)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def gateway() -> Iterator[tuple[str, type[_Gateway]]]:
    handler = type("Gateway", (_Gateway,), {"pushes": [], "auth": [], "status": 200})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def server() -> Iterator[str]:
    """`gym-metrics serve math_exact` in a subprocess on a free port; its address."""
    with serve_process() as address:
        yield address


def _value(body: str, name: str) -> float:
    m = re.search(rf"^{re.escape(name)} (\S+)$", body, re.M)
    assert m, f"{name} not pushed"
    return float(m.group(1))


@pytest.mark.slow
def test_collect_pushes_its_counters(server: str, gateway: tuple[str, type[_Gateway]], tmp_path: Path) -> None:
    need("prometheus_client")
    url, recorded = gateway
    sample = resolve_server("math_exact")().sample
    assert sample is not None
    started = time.monotonic()
    code = main(["collect", "--server", server, "--input", str(sample), "--output", str(tmp_path / "eval_run.jsonl"),
                 "--pushgateway", url, "--push-interval", "0.001", "--batch-size", "4", "--max-in-flight", "1"])  # fmt: skip
    assert code == 0 and time.monotonic() - started < 60
    assert len(recorded.pushes) >= 2, "no periodic push before the final one"
    assert {(m, p) for m, p, _ in recorded.pushes} == {("PUT", "/metrics/job/gym_metrics_collect/instance/eval_run")}
    final = recorded.pushes[-1][2]
    rows = sum(1 for _ in sample.open())
    assert _value(final, "gym_metrics_collect_finished") == 1
    assert _value(final, "gym_metrics_collect_rollouts_done_total") == rows
    assert _value(final, "gym_metrics_collect_rollouts_sent_total") == rows
    assert _value(final, "gym_metrics_collect_batches_total") == -(-rows // 4)
    assert _value(final, "gym_metrics_collect_duration_seconds") > 0
    assert 'gym_metrics_collect_rollouts_failed_total{error_kind="verify"} 0.0' in final
    assert all("gym_metrics_collect_finished 0.0" in body for _, _, body in recorded.pushes[:-1])


@pytest.mark.slow
def test_a_failed_push_exits_1_and_keeps_the_metrics(
    server: str, gateway: tuple[str, type[_Gateway]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    need("prometheus_client")
    url, recorded = gateway
    recorded.status = 500
    sample = resolve_server("math_exact")().sample
    assert sample is not None
    out = tmp_path / "eval_run.jsonl"
    assert main(["collect", "--server", server, "--input", str(sample), "--output", str(out), "--pushgateway", url]) == 1
    assert (tmp_path / "eval_run_aggregate_metrics.json").is_file()
    assert "push to the pushgateway failed" in capsys.readouterr().err


def test_pushgateway_without_the_extra_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    sample = resolve_server("math_exact")().sample
    code = main(["collect", "--server", "127.0.0.1:1", "--input", str(sample), "--output", str(tmp_path / "o.jsonl"),
                 "--pushgateway", "http://127.0.0.1:1"])  # fmt: skip
    assert code == 2 and "pip install 'gym-metrics[prometheus]'" in capsys.readouterr().err


def test_a_user_and_password_in_the_url_are_basic_auth_and_never_shown(gateway: tuple[str, type[_Gateway]]) -> None:
    """They went into the URL prometheus_client opened (never sent as auth), and a failure
    printed the password (`nonnumeric port: 'S3CRETpw@127.0.0.1'`)."""
    need("prometheus_client")
    from gym_metrics.exporters import CollectCounters, Pusher, PushgatewayError

    url, recorded = gateway
    counters = CollectCounters(3, 0, 0, 0, 1.0)
    Pusher(url.replace("http://", "http://alice:S3C%40RETpw@"), "run").push(counters)
    assert recorded.auth == ["Basic " + base64.b64encode(b"alice:S3C@RETpw").decode()]
    assert _value(recorded.pushes[-1][2], "gym_metrics_collect_rollouts_done_total") == 3
    for bad in ("http://alice:S3CRETpw@127.0.0.1", f"{url.replace('http://', 'http://alice:S3C@RETpw@')}x"):
        with pytest.raises(PushgatewayError) as failed:
            Pusher(bad, "run").push(counters)
        assert "S3C" not in str(failed.value) and "RETpw" not in str(failed.value), failed.value


@pytest.mark.slow
def test_collect_with_processes_pushes_the_shards_counts(server: str, gateway: tuple[str, type[_Gateway]], tmp_path: Path) -> None:
    """With --processes the final push said 0 rollouts done: the parent's own counter never
    moved (its shards collected)."""
    need("prometheus_client")
    url, recorded = gateway
    sample = resolve_server("math_exact")().sample
    assert sample is not None
    code = main(["collect", "--server", server, "--input", str(sample), "--output", str(tmp_path / "eval_run.jsonl"),
                 "--pushgateway", url, "--push-interval", "0.001", "--processes", "2"])  # fmt: skip
    rows = sum(1 for _ in sample.open())
    final = recorded.pushes[-1][2]
    assert code == 0 and _value(final, "gym_metrics_collect_rollouts_done_total") == rows
    assert _value(final, "gym_metrics_collect_rollouts_sent_total") == rows and _value(final, "gym_metrics_collect_finished") == 1
