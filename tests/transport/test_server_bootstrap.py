"""Server bootstrap over real sockets: health, reflection, auth, TLS, limits, shutdown, signals."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer
from gym_metrics._transport.server import RunningServer, ServerConfig, start_server
from gym_metrics._transport.server import SERVICE_NAME
from gym_metrics._transport.client import ResourcesClient
from gym_metrics.errors import InvalidInputError
from gym_metrics.v1 import resources_pb2 as pb
from gym_metrics.v1 import resources_pb2_grpc as pb_grpc

from _certs import self_signed as make_certificate
from _ci import need_tool

pytestmark = pytest.mark.timeout(30)

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
LISTENING = re.compile(r"listening on (\S+):(\d+)")


class SleepRequest(BaseVerifyRequest):
    sleep: float = 0.0


class SleepyEnv(SimpleResourcesServer):
    """Verify sleeps as long as the request asks; `started` is set when a verify begins."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def verify(self, body: SleepRequest) -> BaseVerifyResponse:
        self.started.set()
        await asyncio.sleep(body.sleep)
        return BaseVerifyResponse(reward=1.0)


def verify_request(sleep: float = 0.0, pad: int = 0) -> pb.VerifyRequest:
    body = {"sleep": sleep, **({"pad": "x" * pad} if pad else {})}
    return pb.VerifyRequest(body_json=json.dumps(body))


async def health_status(channel: aio.Channel, service: str = "") -> int:
    reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=3)
    return reply.status


@pytest.fixture
async def server_factory() -> AsyncIterator:
    """Starts servers on 127.0.0.1:0 and stops whatever a test left running."""
    started: list[RunningServer] = []

    async def start(env: SimpleResourcesServer | None = None, **config: object) -> RunningServer:
        config.setdefault("port", 0)
        running = await start_server(env or SleepyEnv(), ServerConfig(**config))  # type: ignore[arg-type]
        started.append(running)
        return running

    yield start
    for running in started:
        await running.stop(0)


# ----------------------------------------------------------------- health


async def test_health_serving_for_server_and_service(server_factory) -> None:
    running = await server_factory()
    assert running.port > 0
    async with aio.insecure_channel(running.address) as channel:
        assert await health_status(channel) == SERVING
        assert await health_status(channel, SERVICE_NAME) == SERVING
        with pytest.raises(aio.AioRpcError) as err:
            await health_status(channel, "no.such.Service")
        assert err.value.code() == grpc.StatusCode.NOT_FOUND


async def test_health_not_serving_during_drain_then_calls_refused(server_factory) -> None:
    running = await server_factory(drain_seconds=1.0)
    async with aio.insecure_channel(running.address) as channel:
        assert await health_status(channel, SERVICE_NAME) == SERVING
        stopping = asyncio.ensure_future(running.stop(5))
        await asyncio.sleep(0.2)
        assert not stopping.done()
        assert await health_status(channel, SERVICE_NAME) == NOT_SERVING
        assert await health_status(channel) == NOT_SERVING
        await asyncio.wait_for(stopping, 10)
        with pytest.raises(aio.AioRpcError) as err:
            await health_status(channel)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_watch_reports_not_serving_and_does_not_hold_shutdown(server_factory) -> None:
    env = SleepyEnv()
    running = await server_factory(env)
    async with aio.insecure_channel(running.address) as channel:
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=SERVICE_NAME))
        first = await asyncio.wait_for(watch.read(), 3)
        assert first.status == SERVING
        slow = asyncio.ensure_future(pb_grpc.ResourcesServiceStub(channel).Verify(verify_request(sleep=1.0)))
        await asyncio.wait_for(env.started.wait(), 3)
        stopping = asyncio.ensure_future(running.stop(30))
        # During the grace period: the watcher hears NOT_SERVING while the slow call still runs.
        update = await asyncio.wait_for(watch.read(), 3)
        assert update.status == NOT_SERVING
        assert not slow.done()
        assert await asyncio.wait_for(watch.read(), 3) is aio.EOF
        assert (await asyncio.wait_for(slow, 5)).reward == 1.0
        # An open Watch must not keep the server alive for the whole 30 s grace.
        await asyncio.wait_for(stopping, 5)


# ----------------------------------------------------------------- graceful shutdown


async def test_graceful_shutdown_finishes_in_flight_and_refuses_new(server_factory) -> None:
    env = SleepyEnv()
    running = await server_factory(env)
    async with aio.insecure_channel(running.address) as channel:
        stub = pb_grpc.ResourcesServiceStub(channel)
        slow = asyncio.ensure_future(stub.Verify(verify_request(sleep=1.0), timeout=10))
        await asyncio.wait_for(env.started.wait(), 3)
        stopping = asyncio.ensure_future(running.stop(10))
        await asyncio.sleep(0.2)
        with pytest.raises(aio.AioRpcError) as err:
            await stub.Verify(verify_request(), timeout=3)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert not slow.done()
        assert (await asyncio.wait_for(slow, 5)).reward == 1.0
        await asyncio.wait_for(stopping, 5)


async def test_second_stop_cuts_grace_short(server_factory) -> None:
    env = SleepyEnv()
    running = await server_factory(env)
    async with aio.insecure_channel(running.address) as channel:
        slow = asyncio.ensure_future(pb_grpc.ResourcesServiceStub(channel).Verify(verify_request(sleep=20)))
        await asyncio.wait_for(env.started.wait(), 3)
        stopping = asyncio.ensure_future(running.stop(30))
        await asyncio.sleep(0.2)
        await asyncio.wait_for(running.stop(0), 5)
        await asyncio.wait_for(stopping, 5)
        with pytest.raises(aio.AioRpcError):
            await asyncio.wait_for(slow, 5)


# ----------------------------------------------------------------- reflection


async def test_reflection_lists_and_describes_the_service(server_factory) -> None:
    running = await server_factory()
    async with aio.insecure_channel(running.address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        requests = [
            reflection_pb2.ServerReflectionRequest(list_services=""),
            reflection_pb2.ServerReflectionRequest(file_containing_symbol=SERVICE_NAME),
        ]
        replies = [r async for r in stub.ServerReflectionInfo(iter(requests), timeout=5)]
    names = {s.name for s in replies[0].list_services_response.service}
    assert {"gym_metrics.v1.ResourcesService", "grpc.health.v1.Health"} <= names
    assert replies[1].file_descriptor_response.file_descriptor_proto  # grpcurl can describe it


async def test_reflection_can_be_turned_off(server_factory) -> None:
    running = await server_factory(reflection=False)
    async with aio.insecure_channel(running.address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        # No request message: a write racing the refusal would surface as a bare INTERNAL.
        call = stub.ServerReflectionInfo(iter([]), timeout=5)
        with pytest.raises(aio.AioRpcError) as err:
            _ = [r async for r in call]
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


# ----------------------------------------------------------------- auth

TOKEN = "s3cret-token-value"


@pytest.mark.parametrize(
    "metadata",
    [None, [("authorization", "Bearer wrong-token")], [("authorization", TOKEN)], [("x-api-key", TOKEN)]],
    ids=["missing", "wrong", "no-scheme", "other-header"],
)
async def test_auth_refuses_without_the_right_token(server_factory, caplog, metadata) -> None:
    running = await server_factory(auth_token=TOKEN)
    caplog.set_level(logging.DEBUG)
    async with aio.insecure_channel(running.address) as channel:
        with pytest.raises(aio.AioRpcError) as err:
            await pb_grpc.ResourcesServiceStub(channel).Verify(verify_request(), metadata=metadata, timeout=10)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "token" in (err.value.details() or "")
    assert TOKEN not in (err.value.details() or "")
    assert "wrong-token" not in (err.value.details() or "")
    for _ in range(100):  # the access log line may follow the answer: wait for it (2 s at most)
        if caplog.records:
            break
        await asyncio.sleep(0.02)
    assert caplog.records, "the refused call should be access-logged"
    assert all(TOKEN not in r.getMessage() for r in caplog.records)


async def test_auth_accepts_the_token_and_exempts_health_and_reflection(server_factory) -> None:
    running = await server_factory(auth_token=TOKEN)
    assert TOKEN not in repr(running.config)
    good = [("authorization", f"Bearer {TOKEN}")]
    async with aio.insecure_channel(running.address) as channel:
        stub = pb_grpc.ResourcesServiceStub(channel)
        assert (await stub.Verify(verify_request(), metadata=good, timeout=3)).reward == 1.0
        info = await stub.GetServerInfo(pb.GetServerInfoRequest(), metadata=[("authorization", f"bearer {TOKEN}")])
        assert info.name == "SleepyEnv"
        assert await health_status(channel, SERVICE_NAME) == SERVING
        reflect = reflection_pb2_grpc.ServerReflectionStub(channel)
        call = reflect.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)
        assert [r async for r in call][0].list_services_response.service


async def test_auth_refuses_streaming_calls_before_any_message(server_factory) -> None:
    running = await server_factory(auth_token=TOKEN)
    async with aio.insecure_channel(running.address) as channel:
        call = pb_grpc.ResourcesServiceStub(channel).VerifyStream(timeout=3)  # the client sends nothing
        with pytest.raises(aio.AioRpcError) as err:
            await call.read()
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


# ----------------------------------------------------------------- TLS


@pytest.fixture
def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    return make_certificate(tmp_path, "IP:127.0.0.1,DNS:localhost")


async def test_tls(server_factory, self_signed) -> None:
    cert, key = self_signed
    running = await server_factory(tls_cert_file=cert, tls_key_file=key)
    credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
    async with aio.secure_channel(running.address, credentials) as channel:
        assert (await pb_grpc.ResourcesServiceStub(channel).Verify(verify_request(), timeout=5)).reward == 1.0
    async with aio.insecure_channel(running.address) as channel:
        with pytest.raises(aio.AioRpcError) as err:
            await pb_grpc.ResourcesServiceStub(channel).Verify(verify_request(), timeout=3)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_a_tls_file_that_cannot_be_used_is_named_not_read_as_a_port_problem(server_factory, self_signed, tmp_path: Path) -> None:
    """A certificate that is not PEM, a key of another certificate, a missing file or a root
    that holds no certificate failed as "cannot listen on 127.0.0.1:0" (the server) or a refused
    connection (the client), naming neither the file nor what was wrong with it."""
    cert, key = self_signed
    other_key = tmp_path / "other.pem"
    subprocess.run([need_tool("openssl", "the TLS tests make their keys with the openssl CLI"), "genpkey", "-algorithm", "EC",
                    "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", str(other_key)], check=True, capture_output=True, timeout=20)  # fmt: skip
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    for given, said in (
        ((garbage, key), f"{garbage}, {key}: not a PEM certificate chain and its unencrypted private key"),
        ((cert, other_key), f"{cert}, {other_key}: the key is not the certificate's"),
        ((cert, tmp_path / "missing.pem"), f"tls_key_file: {tmp_path / 'missing.pem'}: No such file or directory"),
    ):
        with pytest.raises(InvalidInputError) as err:
            await server_factory(tls_cert_file=given[0], tls_key_file=given[1])
        assert said in str(err.value) and "listen" not in str(err.value)
    for roots, said in ((garbage, f"tls_ca: {garbage}: no PEM certificate in it"), (tmp_path / "missing.pem", "No such file or directory")):
        with pytest.raises(InvalidInputError) as err:
            ResourcesClient("127.0.0.1:1", tls_ca=roots)
        assert said in str(err.value)
    run = subprocess.run([sys.executable, "-m", "gym_metrics.cli", "serve", "math_exact", "--port", "0", "--tls-cert", str(cert), "--tls-key", str(other_key)],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert run.returncode == 2 and "the key is not the certificate's" in run.stderr and "cannot listen" not in run.stderr, run.stderr


def test_tls_needs_cert_and_key() -> None:
    with pytest.raises(ValueError, match="tls_cert_file and tls_key_file"):
        ServerConfig(tls_cert_file="cert.pem")


# ----------------------------------------------------------------- limits and binding


async def test_oversized_request_is_refused_and_server_keeps_serving(server_factory) -> None:
    running = await server_factory(max_message_bytes=1024)
    async with aio.insecure_channel(running.address) as channel:
        stub = pb_grpc.ResourcesServiceStub(channel)
        with pytest.raises(aio.AioRpcError) as err:
            await stub.Verify(verify_request(pad=4000), timeout=3)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert (await stub.Verify(verify_request(pad=100), timeout=3)).reward == 1.0


async def test_busy_port_fails_loudly(server_factory) -> None:
    first = await server_factory()
    with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{first.port}"):
        await server_factory(port=first.port)


async def test_access_log_one_json_line_per_rpc(server_factory, caplog) -> None:
    caplog.set_level(logging.INFO, logger="gym_metrics.access")
    running = await server_factory()
    async with aio.insecure_channel(running.address) as channel:
        stub = pb_grpc.ResourcesServiceStub(channel)
        await stub.Verify(verify_request(), timeout=3)
        with pytest.raises(aio.AioRpcError):
            await stub.Verify(pb.VerifyRequest(body_json="not json"), timeout=3)
        item = pb.VerifyItem(task_index=0, rollout_index=0, body_json="{}")
        call = stub.VerifyStream(iter([pb.VerifyStreamRequest(batch_id="b1", items=[item])]), timeout=5)
        assert [r.batch_id async for r in call] == ["b1"]
    await running.stop(1)  # handlers log when they end
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "gym_metrics.access"]
    by_method = {(line["method"].rsplit("/", 1)[1], line["code"]) for line in lines}
    assert {("Verify", "OK"), ("Verify", "INVALID_ARGUMENT"), ("VerifyStream", "OK")} <= by_method
    for line in lines:
        assert line["peer"].startswith("ipv4:127.0.0.1:")
        assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0


# ----------------------------------------------------------------- serve(): real processes

APP = """
import asyncio
from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer

class SleepRequest(BaseVerifyRequest):
    sleep: float = 0.0

class SleepyApp(SimpleResourcesServer):
    async def verify(self, body: SleepRequest) -> BaseVerifyResponse:
        await asyncio.sleep(body.sleep)
        return BaseVerifyResponse(reward=0.5)
"""


async def spawn_serve(tmp_path: Path, *args: str, **env: str) -> asyncio.subprocess.Process:
    """`serve("path/app.py:SleepyApp", **eval(args[0]))` in a child process, stderr piped."""
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(APP))
    script = "import sys; from gym_metrics._transport.server import serve; serve(sys.argv[1], **eval(sys.argv[2]))"
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, f"{app}:SleepyApp", *args,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, "GRPC_VERBOSITY": "ERROR", **env}, start_new_session=True,
    )  # fmt: skip


async def kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the server and any workers it forked (its own session), then reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    assert proc.stderr is not None
    await asyncio.wait_for(proc.stderr.read(), 5)  # EOF once every holder of the pipe is gone
    await asyncio.wait_for(proc.wait(), 5)


async def read_listening(proc: asyncio.subprocess.Process, count: int = 1) -> list[int]:
    """Ports from the first `count` "listening on" lines (fails with what stderr said)."""
    assert proc.stderr is not None
    ports, seen = [], []
    deadline = time.monotonic() + 15
    while len(ports) < count:
        line = await asyncio.wait_for(proc.stderr.readline(), max(0.1, deadline - time.monotonic()))
        if not line:
            raise AssertionError(f"server exited before listening: {b''.join(seen).decode()}")
        seen.append(line)
        if match := LISTENING.search(line.decode()):
            ports.append(int(match.group(2)))
    return ports


async def finish(proc: asyncio.subprocess.Process) -> tuple[int, str]:
    assert proc.stderr is not None
    try:
        rest = await asyncio.wait_for(proc.stderr.read(), 10)
        return await asyncio.wait_for(proc.wait(), 5), rest.decode()
    except asyncio.TimeoutError:
        await kill_group(proc)
        raise AssertionError("server did not exit within 10 s of SIGTERM") from None


async def test_sigterm_shuts_down_gracefully(tmp_path: Path) -> None:
    proc = await spawn_serve(tmp_path, "{'port': 0, 'grace_seconds': 10}")
    try:
        [port] = await read_listening(proc)
        async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.ResourcesServiceStub(channel)
            assert (await stub.Verify(verify_request(), timeout=5)).reward == 0.5
            slow = asyncio.ensure_future(stub.Verify(verify_request(sleep=1.0), timeout=10))
            await asyncio.sleep(0.3)
            proc.send_signal(signal.SIGTERM)
            assert (await asyncio.wait_for(slow, 10)).reward == 0.5
        code, stderr = await finish(proc)
    finally:
        await kill_group(proc)
    assert code == 0, stderr
    access = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert any(a["method"].endswith("/Verify") and a["code"] == "OK" for a in access), stderr


async def test_second_sigterm_cancels_in_flight_calls(tmp_path: Path) -> None:
    proc = await spawn_serve(tmp_path, "{'port': 0, 'grace_seconds': 60}")
    try:
        [port] = await read_listening(proc)
        async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            slow = asyncio.ensure_future(pb_grpc.ResourcesServiceStub(channel).Verify(verify_request(sleep=30)))
            await asyncio.sleep(0.3)
            proc.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.3)
            assert proc.returncode is None and not slow.done()  # the 60 s grace is running
            proc.send_signal(signal.SIGTERM)
            with pytest.raises(aio.AioRpcError):
                await asyncio.wait_for(slow, 10)
        code, stderr = await finish(proc)
    finally:
        await kill_group(proc)
    assert code == 0, stderr
    assert "cancelling in-flight calls" in stderr


async def test_streams_cut_at_the_end_of_the_grace_end_without_a_traceback(tmp_path: Path) -> None:
    """Streams still in flight when the grace runs out are cancelled; their calls' tasks finish
    that before the process ends (grpc printed a traceback for each one left pending)."""
    proc = await spawn_serve(tmp_path, "{'port': 0, 'grace_seconds': 0.5}")
    try:
        [port] = await read_listening(proc)
        async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.ResourcesServiceStub(channel)

            async def one_slow_batch() -> AsyncIterator[pb.VerifyStreamRequest]:
                item = pb.VerifyItem(task_index=0, rollout_index=0, body_json=json.dumps({"sleep": 30}))
                yield pb.VerifyStreamRequest(batch_id="b", items=[item])
                await asyncio.sleep(60)

            async def read(call: aio.StreamStreamCall) -> None:
                async for _ in call:
                    pass

            streams = [asyncio.ensure_future(read(stub.VerifyStream(one_slow_batch()))) for _ in range(3)]
            await asyncio.sleep(0.5)
            proc.send_signal(signal.SIGTERM)
            for stream in streams:
                with pytest.raises(aio.AioRpcError):
                    await asyncio.wait_for(stream, 10)
        code, stderr = await finish(proc)
    finally:
        await kill_group(proc)
    assert code == 0, stderr
    assert "Traceback" not in stderr and "CancelledError" not in stderr, stderr
    assert stderr.count('"code": "CANCELLED"') == 3, stderr


async def test_serve_reads_the_token_from_the_environment(tmp_path: Path) -> None:
    proc = await spawn_serve(tmp_path, "{'port': 0}", GYM_METRICS_AUTH_TOKEN=TOKEN)
    try:
        [port] = await read_listening(proc)
        async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.ResourcesServiceStub(channel)
            with pytest.raises(aio.AioRpcError) as err:
                await stub.Verify(verify_request(), timeout=5)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
            reply = await stub.Verify(verify_request(), metadata=[("authorization", f"Bearer {TOKEN}")], timeout=5)
            assert reply.reward == 0.5
        proc.send_signal(signal.SIGTERM)
        code, stderr = await finish(proc)
    finally:
        await kill_group(proc)
    assert code == 0, stderr
    assert TOKEN not in stderr


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_workers_share_one_port_and_stop_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    proc = await spawn_serve(tmp_path, f"{{'port': {port}, 'workers': 2, 'grace_seconds': 5}}")
    try:
        assert await read_listening(proc) == [port]  # one line, from the parent, once both are up
        async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.ResourcesServiceStub(channel)
            replies = await asyncio.gather(*(stub.Verify(verify_request(), timeout=5) for _ in range(4)))
            assert [r.reward for r in replies] == [0.5] * 4
        proc.send_signal(signal.SIGTERM)
        code, stderr = await finish(proc)
    finally:
        await kill_group(proc)
    assert code == 0, stderr
    assert stderr.count("stopped (worker") == 2, stderr


async def test_workers_exit_when_their_parent_is_killed(tmp_path: Path) -> None:
    port = free_port()
    proc = await spawn_serve(tmp_path, f"{{'port': {port}, 'workers': 2}}")
    try:
        assert await read_listening(proc) == [port]
        proc.kill()  # the parent only: SIGKILL cannot be forwarded
        deadline = time.monotonic() + 10
        while accepts_connections(port):
            assert time.monotonic() < deadline, "orphaned workers still hold the port"
            await asyncio.sleep(0.1)
    finally:
        await kill_group(proc)


def accepts_connections(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


async def test_workers_share_a_port_picked_once_with_port_0(tmp_path: Path) -> None:
    """The parent picks the port (a SO_REUSEPORT socket bound, not listening, and kept) and
    prints one "listening on" line once every worker serves on it."""
    proc = await spawn_serve(tmp_path, "{'port': 0, 'workers': 2, 'grace_seconds': 5}")
    try:
        [port] = await read_listening(proc)
        assert port != 0
        async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            reply = await pb_grpc.ResourcesServiceStub(channel).Verify(verify_request(), timeout=5)
            assert reply.reward == 0.5
        with socket.socket() as other:  # nobody else can take the port while the server runs
            with pytest.raises(OSError):
                other.bind(("127.0.0.1", port))
        proc.send_signal(signal.SIGTERM)
        code, stderr = await finish(proc)
    finally:
        await kill_group(proc)
    assert code == 0, stderr
    assert stderr.count("stopped (worker") == 2, stderr
