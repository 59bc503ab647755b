"""The Ray extra stays optional: nothing imports Ray until it is used, and without it the
error names the extra. The server-process half of serve_replicas is tested here without Ray."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gym_metrics.errors import InvalidInputError
from gym_metrics.ray import RAY_EXTRA_HINT, serve_replicas
from gym_metrics.ray._replicas import ServerProcess


def test_importing_the_package_and_its_ray_module_loads_no_ray() -> None:
    code = "import sys, gym_metrics, gym_metrics.ray; assert 'ray' not in sys.modules, 'ray imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_without_ray_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'gym-metrics\[ray\]'"):
        serve_replicas("math_exact", 1)
    assert "gym-metrics[ray]" in RAY_EXTRA_HINT


def test_bad_arguments_are_named_before_ray_is_touched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(InvalidInputError) as caught:
        serve_replicas(" ", 0, port=70000)
    fields = {v.field for v in caught.value.violations}
    assert fields == {"target", "n", "port"}


@pytest.mark.slow  # starts a `gym-metrics serve` process
def test_the_server_process_reports_its_port_and_stops() -> None:
    proc = ServerProcess(["serve", "math_exact", "--host", "127.0.0.1", "--port", "0", "--grace", "1"],
                         advertise_host="127.0.0.1")  # fmt: skip
    try:
        address = proc.address(60)
        host, _, port = address.rpartition(":")
        assert host == "127.0.0.1" and int(port) > 0 and proc.returncode() is None
    finally:
        assert proc.stop(1) == 0  # SIGTERM: a graceful exit
    assert "listening on" in proc.tail()


@pytest.mark.slow
def test_a_server_that_cannot_start_reports_its_last_lines() -> None:
    proc = ServerProcess(["serve", "no_such_environment", "--port", "0"], advertise_host="127.0.0.1")
    with pytest.raises(Exception, match="exited with code 2 before listening(.|\n)*no_such_environment"):
        proc.address(60)
