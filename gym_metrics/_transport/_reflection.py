"""Server reflection under both names clients use: v1alpha (grpcio-reflection) and v1.

grpcio-reflection serves only `grpc.reflection.v1alpha`; buf, grpcurl and Postman also ask
`grpc.reflection.v1`. The two protocols are the same messages under another package, so the
v1 service reuses the v1alpha servicer and messages (the bytes on the wire are identical).
The google.rpc status and detail types are listed too, so a reflecting client can decode the
BadRequest carried by an INVALID_ARGUMENT instead of showing base64.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc
from grpc_reflection.v1alpha._async import ReflectionServicer

V1_SERVICE = "grpc.reflection.v1.ServerReflection"
DETAIL_TYPES = (status_pb2.DESCRIPTOR.name, error_details_pb2.DESCRIPTOR.name)
"""Files reflection must be able to hand out although no service refers to them."""


def enable_reflection(service_names: Sequence[str], server: Any) -> None:
    """Serve reflection (v1alpha and v1) for `service_names` and the reflection services."""
    names = tuple(service_names) + (reflection.SERVICE_NAME, V1_SERVICE)
    servicer = ReflectionServicer(names)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)  # v1alpha
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    handlers = {"ServerReflectionInfo": handler}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(V1_SERVICE, handlers),))
    server.add_registered_method_handlers(V1_SERVICE, handlers)


__all__ = ["DETAIL_TYPES", "V1_SERVICE", "enable_reflection"]
