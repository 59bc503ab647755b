"""How the policy pool connects (gym_metrics/targets/_sockets.py): local ports taken from the
whole ephemeral range (no kernel scan of every even port past ~14,000 connections), host
names looked up, TLS verified against the host's name, and no socket left open by a connect
that its deadline cut."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from pathlib import Path

import pytest

from gym_metrics.targets._sockets import spread_ports
from gym_metrics.targets._wire import WirePool, WireTimeout
from _certs import self_signed

pytestmark = pytest.mark.timeout(30)

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"


def spreads() -> bool:
    with socket.socket() as sock:
        return spread_ports(sock)


async def start_server(
    hold: asyncio.Event | None = None, tls: ssl.SSLContext | None = None, sock: socket.socket | None = None
) -> tuple[asyncio.AbstractServer, list[int]]:
    """A server answering every request `{}` (once `hold` is set, when given), on 127.0.0.1 or
    on the listening `sock`; it records the peer port of each connection."""
    ports: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ports.append(writer.get_extra_info("peername")[1])
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
                await reader.readexactly(length)
                if hold is not None:
                    await hold.wait()
                writer.write(OK)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            writer.close()

    if sock is not None:
        return await asyncio.start_server(serve, sock=sock), ports
    return await asyncio.start_server(serve, "127.0.0.1", 0, ssl=tls), ports


@pytest.mark.skipif(not spreads(), reason="this kernel has no IP_LOCAL_PORT_RANGE (Linux 6.3+)")
async def test_connections_take_local_ports_of_both_parities() -> None:
    """Linux gives a plain connect() an even port while any is free; the pool's sockets are
    searched port by port, so 48 connections held at once are never all even (odds 2^-48)."""
    hold = asyncio.Event()
    server, ports = await start_server(hold)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    pool = WirePool(url + "/v1", 48, 10.0)
    try:
        posts = [asyncio.ensure_future(pool.post(url + "/v1/responses", b"{}", {})) for _ in range(48)]
        while len(ports) < 48:
            await asyncio.sleep(0.01)
        hold.set()
        assert {status for status, _, _ in await asyncio.gather(*posts)} == {200}
    finally:
        await pool.aclose()
        server.close()
    assert len(set(ports)) == 48 and {port % 2 for port in ports} == {0, 1}


async def test_off_linux_connections_are_opened_as_asyncio_opens_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Elsewhere the option does not exist and not every loop has add_writer: asyncio's own
    create_connection (on this kernel its ports are then the even ones a plain connect gets)."""
    import sys

    monkeypatch.setattr(sys, "platform", "darwin")
    server, ports = await start_server()
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    pool = WirePool(url + "/v1", 8, 10.0)
    try:
        hold = [asyncio.ensure_future(pool.post(url + "/v1/responses", b"{}", {})) for _ in range(8)]
        assert {status for status, _, _ in await asyncio.gather(*hold)} == {200}
    finally:
        await pool.aclose()
        server.close()
    assert ports and {port % 2 for port in ports} == {0}


async def test_a_host_name_is_looked_up() -> None:
    """`localhost` may give ::1 first, where nothing listens: the next address is tried."""
    server, ports = await start_server()
    port = server.sockets[0].getsockname()[1]
    pool = WirePool(f"http://localhost:{port}/v1", 2, 10.0)
    try:
        status, _, body = await pool.post(f"http://localhost:{port}/v1/responses", b"{}", {})
    finally:
        await pool.aclose()
        server.close()
    assert (status, bytes(body), len(ports)) == (200, b"{}", 1)


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    return self_signed(tmp_path, "DNS:localhost")


async def test_tls_is_verified_against_the_host_name(certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The certificate names `localhost`: trusted through it, refused through 127.0.0.1."""
    cert, key = certificate
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # what the pool's default context trusts
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    server, _ = await start_server(tls=tls)
    port = server.sockets[0].getsockname()[1]
    by_name, by_address = WirePool(f"https://localhost:{port}/v1", 1, 10.0), WirePool(f"https://127.0.0.1:{port}/v1", 1, 10.0)
    try:
        status, _, body = await by_name.post(f"https://localhost:{port}/v1/responses", b"{}", {})
        with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED|IP address mismatch"):
            await by_address.post(f"https://127.0.0.1:{port}/v1/responses", b"{}", {})
    finally:
        await by_name.aclose()
        await by_address.aclose()
        server.close()
    assert (status, bytes(body)) == (200, b"{}")


def sockets_to(port: int) -> list[str]:
    """This process's TCP sockets whose peer is 127.0.0.1:`port` (/proc/net/tcp by inode)."""
    mine = {os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}")}
    peer = "0100007F:%04X" % port
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return [f[9] for f in (line.split() for line in lines) if f[2] == peer and f"socket:[{f[9]}]" in mine]


def full_listener() -> tuple[socket.socket, list[socket.socket]]:
    """A listener whose accept queue is full (its backlog + 1 connections no one accepted):
    the next connect's handshake waits for room (its SYN dropped, sent again after a second)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(listener.getsockname())
        fillers.append(filler)
    return listener, fillers


async def test_a_handshake_that_ends_after_the_connect_call_is_waited_for() -> None:
    listener, fillers = full_listener()
    await asyncio.sleep(0.1)
    url = "http://127.0.0.1:%d" % listener.getsockname()[1]
    pool = WirePool(url + "/v1", 1, 10.0)
    post = asyncio.ensure_future(pool.post(url + "/v1/responses", b"{}", {}))
    try:
        await asyncio.sleep(0.3)
        assert not post.done()  # still in its handshake
        server, _ = await start_server(sock=listener)  # the queue drained: the SYN sent again gets in
        status, _, body = await asyncio.wait_for(post, 10)
        server.close()
    finally:
        await pool.aclose()
        for sock in (*fillers, listener):
            sock.close()
    assert (status, bytes(body)) == (200, b"{}")


async def test_a_connect_cut_by_its_deadline_leaves_no_socket_open() -> None:
    """Connects to a full listener wait for the handshake until the pool's timeout cuts them;
    their sockets are closed, not left to the collector."""
    listener, fillers = full_listener()
    port = listener.getsockname()[1]
    await asyncio.sleep(0.1)
    pool = WirePool(f"http://127.0.0.1:{port}/v1", 8, 0.3)
    assert len(sockets_to(port)) == len(fillers)
    try:
        posts = [asyncio.ensure_future(pool.post(f"http://127.0.0.1:{port}/v1/responses", b"{}", {})) for _ in range(8)]
        await asyncio.sleep(0.1)
        assert len(sockets_to(port)) == len(fillers) + 8  # connecting
        results = await asyncio.gather(*posts, return_exceptions=True)
        assert all(isinstance(r, WireTimeout) for r in results), results
        assert len(sockets_to(port)) == len(fillers)
    finally:
        await pool.aclose()
        for sock in (*fillers, listener):
            sock.close()
