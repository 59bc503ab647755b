"""Connected TCP sockets for the policy pool whose local ports come from the whole ephemeral range.

Linux gives a connect() a local port from the even ports of `ip_local_port_range` first (it
keeps the odd ones for bind(0)), and scans every even port before it tries an odd one. Past
about 14,000 connections to one policy address (half of the default 28,232 ports) each new
connect scans them all: about 1 ms of kernel time a connection here against 15 us before, about
0.1 ms of collector CPU an episode at 16,000 in flight (`scripts/bench_connect_ports.py`). A socket
given its own port range (IP_LOCAL_PORT_RANGE, Linux 6.3+; here the system's own range, so no
port is used that would not be) is searched one port at a time from where the last search for
that address ended: no cliff. A Linux kernel that refuses the option keeps its own choice of
port; off Linux, connections are opened as asyncio opens them.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import socket
import ssl
import struct
import sys
from collections.abc import Callable
from typing import Any, TypeVar

IP_LOCAL_PORT_RANGE = 51
"""linux/in.h: a socket's own ephemeral port range, low port in the low 16 bits."""

P = TypeVar("P", bound=asyncio.BaseProtocol)

_refused = False
"""Whether this system refused the option once (then it is not asked again)."""


@functools.lru_cache(maxsize=1)
def _system_range() -> bytes | None:
    """The option's value for the system's own range; None where there is none to read."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = map(int, f.read().split())
    except (OSError, ValueError):
        return None
    return struct.pack("=I", low | high << 16) if 0 < low <= high < 1 << 16 else None


def spread_ports(sock: socket.socket) -> bool:
    """Give `sock` the system's port range as its own (see the module docstring); whether it took."""
    global _refused
    value = _system_range()
    if _refused or value is None:
        return False
    try:
        sock.setsockopt(socket.IPPROTO_IP, IP_LOCAL_PORT_RANGE, value)
    except OSError:
        _refused = True
        return False
    return True


async def open_connection(
    loop: asyncio.AbstractEventLoop, factory: Callable[[], P], host: str, port: int, tls: ssl.SSLContext | None
) -> P:
    """`loop.create_connection`'s protocol for `factory` to `host:port` (TLS verified against
    `host` when `tls` is given), over a socket of `connected` on Linux (elsewhere as asyncio
    connects: the option is Linux's, and add_writer is not every loop's)."""
    if sys.platform != "linux":
        return (await loop.create_connection(factory, host, port, ssl=tls))[1]
    sock = await connected(loop, host, port)
    try:
        return (await loop.create_connection(factory, sock=sock, ssl=tls, server_hostname=host if tls is not None else None))[1]
    except BaseException:
        sock.close()
        raise


async def connected(loop: asyncio.AbstractEventLoop, host: str, port: int) -> socket.socket:
    """A non-blocking TCP socket connected to `host:port` (its addresses tried in turn, as
    `create_connection` tries them), TCP_NODELAY set and its ports spread; the last address's
    OSError when none connects."""
    error: OSError | None = None
    for family, kind, proto, _, address in await _addresses(loop, host, port):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            spread_ports(sock)
            await _connect(loop, sock, address)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
        except BaseException:  # cancelled (its deadline): the socket is not left open
            sock.close()
            raise
    raise error if error is not None else OSError(f"no address for {host}:{port}")


async def _connect(loop: asyncio.AbstractEventLoop, sock: socket.socket, address: Any) -> None:
    """connect(), waiting for the handshake only when the call did not finish it (on loopback
    it does: the loop's `sock_connect` costs three times the CPU of the connect itself)."""
    code = sock.connect_ex(address)
    if code in (errno.EINPROGRESS, errno.EAGAIN) and not _connected(sock):
        ready: asyncio.Future[None] = loop.create_future()
        fd = sock.fileno()
        loop.add_writer(fd, _set, ready)
        try:
            await ready
        finally:
            loop.remove_writer(fd)
        code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    elif code in (errno.EINPROGRESS, errno.EAGAIN, errno.EISCONN):
        code = 0
    if code:
        raise OSError(code, f"Connect call failed {address}: {os.strerror(code)}")


def _connected(sock: socket.socket) -> bool:
    try:
        sock.getpeername()
    except OSError:
        return False
    return True


def _set(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


async def _addresses(loop: asyncio.AbstractEventLoop, host: str, port: int) -> list[tuple[Any, ...]]:
    """`host`'s stream addresses; an address given as such is not looked up."""
    given = _literal(host, port)
    return given if given is not None else await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)


@functools.lru_cache(maxsize=64)
def _literal(host: str, port: int) -> list[tuple[Any, ...]] | None:
    """The address of a `host` that is an IP address (read once: a pool connects to one), else None."""
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except socket.gaierror:
        return None
