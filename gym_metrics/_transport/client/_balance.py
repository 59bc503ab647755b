"""Targets that name several replicas at once (`dns:///name:port`, `ipv4:a:p,b:p`): grpc's
client-side `round_robin` over their addresses, and how many addresses there are.

One VerifyStream call stays on the replica it was placed on, so spreading a collection over
the replicas of such a target means one stream per address: round_robin places each new call
on the next connected address.
"""

from __future__ import annotations

import socket
from typing import Any

BALANCED_SCHEMES = ("dns:", "ipv4:", "ipv6:")
"""Target schemes resolved by grpc to a list of addresses (a Kubernetes headless Service)."""

ROUND_ROBIN: tuple[tuple[str, Any], ...] = (("grpc.lb_policy_name", "round_robin"),)


def is_balanced(target: str) -> bool:
    """Whether grpc resolves `target` to several addresses (vs one "host:port")."""
    return target.startswith(BALANCED_SCHEMES)


def address_count(target: str) -> int:
    """How many distinct addresses `target` resolves to now (at least 1): a `dns:` name
    through the system resolver (blocking: call it in a thread), an `ipv4:`/`ipv6:` list by
    its commas. grpc re-resolves on its own later; this only sizes the number of streams."""
    scheme, _, rest = target.partition(":")
    if scheme in ("ipv4", "ipv6"):
        return max(1, len([a for a in rest.split(",") if a]))
    host_port = rest.lstrip("/")
    if "/" in host_port:  # dns://authority/host:port
        host_port = host_port.split("/", 1)[1]
    host, port = _split(host_port)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return 1  # grpc reports the failure itself, in its own words
    return max(1, len({info[4][:2] for info in infos}))


def _split(host_port: str) -> tuple[str, int | None]:
    """("name", 443) from "name:443", "[::1]:443" or "name" (grpc's default port)."""
    if host_port.startswith("["):
        host, _, port = host_port[1:].partition("]")
        port = port.lstrip(":")
    else:
        host, _, port = host_port.rpartition(":") if host_port.count(":") == 1 else (host_port, "", "")
    return host, int(port) if port.isdigit() else 443
