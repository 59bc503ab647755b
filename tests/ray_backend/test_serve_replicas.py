"""gym_metrics.ray.serve_replicas on a local Ray instance (2 CPUs): replicas start where Ray
puts them, answer GetServerInfo and Verify, and stop (their ports close)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from types import ModuleType

import pytest

from gym_metrics._transport.client import ResourcesClient
from gym_metrics.errors import GymMetricsError
from gym_metrics.ray import Replicas, serve_replicas

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SAMPLE = Path(__file__).resolve().parents[2] / "gym_metrics_servers" / "math_exact" / "sample.jsonl"


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def _accepts(address: str) -> bool:
    try:
        with socket.create_connection(_split(address), timeout=1):
            return True
    except OSError:
        return False


def _wait_closed(address: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while _accepts(address):
        assert time.monotonic() < deadline, f"{address} still accepts connections {timeout:g} s after stop"
        time.sleep(0.2)


async def test_two_replicas_answer_and_stop(ray_cluster: ModuleType) -> None:
    row = json.loads(SAMPLE.read_text().splitlines()[0])
    replicas = serve_replicas("math_exact", 2, startup_timeout=90)
    try:
        assert len(replicas.addresses) == 2 and len(set(replicas.addresses)) == 2, replicas.addresses
        assert replicas.server_args() == ["--server", replicas.addresses[0], "--server", replicas.addresses[1]]
        node_ip = ray_cluster.util.get_node_ip_address()
        for address in replicas.addresses:  # bound to 0.0.0.0, advertised at the node's IP
            assert _split(address)[0] == node_ip
            async with ResourcesClient(address) as client:
                await client.wait_until_reachable(30)
                info = await client.server_info()
                assert info.name == "math_exact"
                verified = await client.verify(row)
                assert verified["reward"] == 1.0 and verified["extracted_answer"] == "42"
    finally:
        replicas.stop()
    for address in replicas.addresses:
        _wait_closed(address)
    replicas.stop()  # idempotent


async def test_serve_args_and_env_reach_the_server_and_a_killed_actor_takes_it_down(ray_cluster: ModuleType) -> None:
    """`serve_args` and `env` reach `gym-metrics serve` (reducers; a token it then requires).
    The server is the actor's child: when Ray ends the actor without stop(), the server goes
    too (Linux parent-death signal), so no orphan holds the port or the CPU."""
    with serve_replicas("math_exact", 1, host="127.0.0.1", serve_args=["--reducers", "pass@1"],
                        env={"GYM_METRICS_AUTH_TOKEN": "s3cret"}, startup_timeout=90) as replicas:  # fmt: skip
        (address,) = replicas.addresses
        assert address.startswith("127.0.0.1:")
        async with ResourcesClient(address, token="s3cret") as client:
            assert (await client.server_info()).metrics == ["pass@1"]
        async with ResourcesClient(address) as client:
            with pytest.raises(Exception, match="(?i)unauthenticated|token"):
                await client.server_info()
        ray_cluster.kill(replicas.actors[0], no_restart=True)
        _wait_closed(address)
    # __exit__ ran stop() on a dead actor without raising


def test_a_replica_that_cannot_start_fails_with_the_servers_words(ray_cluster: ModuleType) -> None:
    with pytest.raises(GymMetricsError, match=r"replica 1 of 1 did not start(.|\n)*no_such_environment"):
        serve_replicas("no_such_environment", 1, startup_timeout=60)


def test_replicas_is_a_context_manager() -> None:
    replicas = Replicas(["10.0.0.1:1", "10.0.0.2:2"], [], grace=1)
    assert list(replicas) == replicas.addresses and len(replicas) == 2
    assert repr(replicas) == "Replicas(['10.0.0.1:1', '10.0.0.2:2'])"
