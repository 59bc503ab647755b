"""Server reflection: v1alpha and v1 both answer, from Python and from buf (a real reflecting
client, installed with the polyglot check's npm packages)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2

from _buf import BUF_DIR, buf_binary

SERVICES = {
    "gym_metrics.v1.ResourcesService",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
}


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gym_metrics.cli", "serve", "math_exact", "--port", "0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    found = None
    deadline = time.monotonic() + 30
    while found is None and time.monotonic() < deadline and proc.poll() is None:
        if match := re.search(r"listening on (\S+)", proc.stderr.readline()):
            found = match.group(1)
    assert found, "server did not start"
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    try:
        yield found
    finally:
        proc.terminate()
        proc.wait(15)


def _ask(address: str, version: str, request: reflection_pb2.ServerReflectionRequest) -> reflection_pb2.ServerReflectionResponse:
    with grpc.insecure_channel(address) as channel:
        call = channel.stream_stream(
            f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        [response] = list(call(iter([request]), timeout=10))
        return response


@pytest.mark.parametrize("version", ["v1alpha", "v1"])
def test_both_reflection_versions_list_the_services(address: str, version: str) -> None:
    response = _ask(address, version, reflection_pb2.ServerReflectionRequest(list_services=""))
    assert {s.name for s in response.list_services_response.service} == SERVICES


@pytest.mark.parametrize("symbol", ["gym_metrics.v1.ResourcesService", "grpc.reflection.v1.ServerReflection"])
def test_v1_hands_out_schemas_with_the_status_detail_types(address: str, symbol: str) -> None:
    response = _ask(address, "v1", reflection_pb2.ServerReflectionRequest(file_containing_symbol=symbol))
    files = [descriptor_pb2.FileDescriptorProto.FromString(f) for f in response.file_descriptor_response.file_descriptor_proto]
    names = {f.name for f in files}
    assert {"google/rpc/error_details.proto", "google/rpc/status.proto"} <= names
    if symbol.startswith("grpc.reflection.v1."):
        [v1] = [f for f in files if f.package == "grpc.reflection.v1"]
        assert v1.service[0].method[0].input_type == ".grpc.reflection.v1.ServerReflectionRequest"


@pytest.fixture(scope="module")
def buf() -> str:
    return buf_binary()


@pytest.mark.timeout(300)
def test_buf_curl_over_reflection_v1(address: str, buf: str) -> None:
    base = [buf, "curl", "--protocol", "grpc", "--http2-prior-knowledge", "--reflect-protocol", "grpc-v1"]
    env = {**os.environ, "BUF_CACHE_DIR": str(BUF_DIR / "cache")}
    listed = subprocess.run([*base, "--list-methods", f"http://{address}"], capture_output=True, text=True, timeout=60, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "gym_metrics.v1.ResourcesService/AggregateMetrics" in listed.stdout.split()
    info = subprocess.run(
        [*base, "-d", "{}", f"http://{address}/gym_metrics.v1.ResourcesService/GetServerInfo"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["name"] == "math_exact"
    refused = subprocess.run(
        [*base, "-d", '{"bodyJson": "{}"}', f"http://{address}/gym_metrics.v1.ResourcesService/Verify"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert refused.returncode != 0
    error = json.loads(refused.stdout or refused.stderr)
    assert error["code"] == "invalid_argument" and "expected_answer" in error["message"]
    assert error["details"][0]["type"] == "google.rpc.BadRequest"
