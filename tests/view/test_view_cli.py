"""`gym-metrics view` as a user runs it: it prints its address, serves the files named, stops on
Ctrl-C with exit 0; a path that is not there is refused (exit 2) naming it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from _viewer_data import write_run


def test_the_command_serves_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    write_run(tmp_path / "a.jsonl", "policy-a", tasks=3, repeats=2, reward=lambda t, r: 1.0)
    proc = subprocess.Popen([sys.executable, "-m", "gym_metrics.cli", "view", str(tmp_path), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("gym-metrics view: http://127.0.0.1:") and "(a.jsonl); Ctrl-C stops" in line, line
        url = line.split()[2]
        with urllib.request.urlopen(url + "api/runs", timeout=30) as res:
            assert [r["name"] for r in json.loads(res.read())["runs"]] == ["a.jsonl"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in proc.stderr.read()  # type: ignore[union-attr]


def test_a_missing_path_is_refused(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "gym_metrics.cli", "view", str(tmp_path / "nope.jsonl"), "--port", "0"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and f"{tmp_path / 'nope.jsonl'}: no such file or folder" in done.stderr
    assert "Traceback" not in done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run([sys.executable, "-m", "gym_metrics.cli", "view", str(empty), "--port", "0"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no rollouts (.jsonl), metrics (_aggregate_metrics.json) or results" in done.stderr


def test_a_taken_port_or_one_out_of_range_is_one_line_exit_2(tmp_path: Path) -> None:
    """uvicorn's own bind printed a traceback and exited 3 ("every rollout failed")."""
    import socket

    write_run(tmp_path / "a.jsonl", "policy-a", tasks=1, repeats=1, reward=lambda t, r: 1.0)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        for given, why in ((str(port), f"cannot listen on 127.0.0.1:{port}: the port is in use"), ("99999", "--port 99999: must be in 0..65535")):
            done = subprocess.run([sys.executable, "-m", "gym_metrics.cli", "view", str(tmp_path), "--port", given],
                                  capture_output=True, text=True, timeout=60)  # fmt: skip
            assert done.returncode == 2 and why in done.stderr and "Traceback" not in done.stderr, done.stderr
