"""Server reflection under both names clients use: v1alpha (grpcio-reflection) and v1.

grpcio-reflection serves only `grpc.reflection.v1alpha`; buf, grpcurl and Postman also ask
`grpc.reflection.v1`. The two protocols are the same messages under another package, so the
v1 service reuses the v1alpha servicer and messages (the bytes on the wire are identical), and
its schema is the v1alpha file renamed. Every file answer also carries the google.rpc status
and detail files: no service refers to them, yet a client needs them to decode the BadRequest
an INVALID_ARGUMENT carries instead of showing base64.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from google.rpc import error_details_pb2, status_pb2
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc
from grpc_reflection.v1alpha._async import ReflectionServicer

V1_SERVICE = "grpc.reflection.v1.ServerReflection"
_V1_FILE = "grpc/reflection/v1/reflection.proto"


def _file_protos(*files: Any) -> dict[str, bytes]:
    """Serialized FileDescriptorProtos of `files` and everything they import, by name."""
    out: dict[str, bytes] = {}
    stack = list(files)
    while stack:
        file = stack.pop()
        if file.name not in out:
            proto = descriptor_pb2.FileDescriptorProto()
            file.CopyToProto(proto)
            out[file.name] = proto.SerializeToString()
            stack.extend(file.dependencies)
    return out


_DETAIL_FILES = _file_protos(status_pb2.DESCRIPTOR, error_details_pb2.DESCRIPTOR)


def _register_v1_schema() -> None:
    """Add the v1 reflection file (the v1alpha one under its v1 names) to the default pool."""
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(_V1_FILE)
        return
    except KeyError:
        pass
    proto = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(proto)
    old, new = proto.package, "grpc.reflection.v1"
    proto.name, proto.package = _V1_FILE, new
    for message in proto.message_type:
        for f in message.field:
            if f.type_name.startswith(f".{old}."):
                f.type_name = f".{new}." + f.type_name[len(old) + 2 :]
    for method in proto.service[0].method:
        method.input_type = method.input_type.replace(f".{old}.", f".{new}.")
        method.output_type = method.output_type.replace(f".{old}.", f".{new}.")
    pool.Add(proto)


class _Servicer(ReflectionServicer):
    """grpcio-reflection's servicer whose file answers also carry the google.rpc files."""

    def _file_by_filename(self, request: Any, filename: str) -> Any:
        # grpcio-reflection's private helpers are not in its stubs
        return _with_detail_files(super()._file_by_filename(request, filename))  # type: ignore[misc]

    def _file_containing_symbol(self, request: Any, fully_qualified_name: str) -> Any:
        return _with_detail_files(super()._file_containing_symbol(request, fully_qualified_name))  # type: ignore[misc]


def _with_detail_files(response: Any) -> Any:
    if response.HasField("file_descriptor_response"):
        files = response.file_descriptor_response.file_descriptor_proto
        have = {descriptor_pb2.FileDescriptorProto.FromString(f).name for f in files}
        files.extend(data for name, data in _DETAIL_FILES.items() if name not in have)
    return response


def enable_reflection(service_names: Sequence[str], server: Any) -> None:
    """Serve reflection (v1alpha and v1) for `service_names` and the reflection services."""
    _register_v1_schema()
    servicer = _Servicer((*service_names, reflection.SERVICE_NAME, V1_SERVICE))
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)  # v1alpha
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    handlers = {"ServerReflectionInfo": handler}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(V1_SERVICE, handlers),))
    server.add_registered_method_handlers(V1_SERVICE, handlers)


__all__ = ["V1_SERVICE", "enable_reflection"]
