"""Open a page in headless Chromium over the DevTools protocol (a minimal WebSocket client in
the standard library: no Playwright, no browser download) and report what a reader's browser
would see: console errors, network requests, DOMContentLoaded time, a screenshot."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_chromium() -> str | None:
    """The Chromium binary: $CHROMIUM, else the first of CANDIDATES on PATH (Debian: chromium)."""
    env = os.environ.get("CHROMIUM")
    if env:
        return env
    return next((found for name in CANDIDATES if (found := shutil.which(name))), None)


@dataclass
class PageLoad:
    """What happened when the page was opened."""

    console_errors: list[str] = field(default_factory=list)
    """console.error calls, uncaught exceptions and browser log errors."""
    requests: list[str] = field(default_factory=list)
    """URLs the page requested besides itself (a self-contained page has none)."""
    dom_content_loaded_ms: float = 0.0
    """From navigation start to the end of DOMContentLoaded (performance timing)."""
    load_ms: float = 0.0
    values: list[Any] = field(default_factory=list)
    """The results of the `evaluate` expressions, in order."""


class _WebSocket:
    """Just enough RFC 6455 for the DevTools protocol: text frames, masked from the client."""

    def __init__(self, url: str, timeout: float) -> None:
        u = urlsplit(url)
        self.sock = socket.create_connection((u.hostname or "127.0.0.1", u.port or 80), timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()
        )  # fmt: skip
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"DevTools refused the WebSocket upgrade: {head[:200]!r}")

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("DevTools closed the connection")
        self.buf += chunk

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, text: str, opcode: int = 0x1) -> None:
        payload = text.encode()
        n = len(payload)
        if n < 126:
            size = bytes([0x80 | n])
        elif n < 65536:
            size = bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            size = bytes([0x80 | 127]) + struct.pack(">Q", n)
        head = bytes([0x80 | opcode]) + size
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))  # commands are small
        self.sock.sendall(head + mask + masked)

    def recv(self) -> str:
        parts = []
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            data = self._read(n)
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise ConnectionError("DevTools closed the WebSocket")
            if opcode == 0x9:  # ping
                self.send(data.decode("latin-1"), 0xA)
                continue
            parts.append(data)
            if b0 & 0x80:
                return b"".join(parts).decode()


class _Session:
    """Commands and events of one attached page (flattened sessions)."""

    def __init__(self, ws: _WebSocket, deadline: float) -> None:
        self.ws, self.deadline, self.next_id, self.session = ws, deadline, 0, ""
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, params: dict[str, Any] | None = None, *, browser: bool = False) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session and not browser:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        while True:
            reply = self._next()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result

    def wait(self, method: str, since: int = 0) -> dict[str, Any]:
        """The first `method` event from events[since:] on, reading until it comes."""
        while True:
            found = next((e for e in self.events[since:] if e.get("method") == method), None)
            if found is not None:
                return found
            self._next()

    def _next(self) -> dict[str, Any]:
        if time.monotonic() > self.deadline:
            raise TimeoutError("headless Chromium did not answer in time")
        msg: dict[str, Any] = json.loads(self.ws.recv())
        if "method" in msg:
            self.events.append(msg)
        return msg


def _launch(binary: str, profile: str, timeout: float) -> tuple[subprocess.Popen[str], str]:
    args = [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
            f"--user-data-dir={profile}", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
            "--disable-background-networking", "--disable-component-update", "--disable-sync", "about:blank"]  # fmt: skip
    # its own session: the browser's helper processes are stopped with it (_stop)
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + timeout
    assert proc.stderr is not None
    for line in proc.stderr:
        if "DevTools listening on " in line:
            # keep draining its log, or a full pipe would stall the browser
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, line.split("DevTools listening on ", 1)[1].strip()
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise RuntimeError(f"{binary} did not start its DevTools endpoint")


def open_in_chromium(
    path: str | Path,
    *,
    screenshot: str | Path | None = None,
    evaluate: Sequence[str | tuple[str, str | Path]] = (),
    width: int = 1100,
    height: int = 900,
    timeout: float = 120.0,
    binary: str | None = None,
) -> PageLoad:
    """Load `path` (a file, or an http:// URL), wait for the load event, run each `evaluate`
    expression (awaiting a promise it returns; their JSON results in `values`; an (expression,
    png) pair saves a PNG of the viewport after it) and, if asked, save a PNG at the end."""
    binary = binary or find_chromium()
    if binary is None:
        raise FileNotFoundError("no Chromium found (Debian: apt-get install chromium; or set $CHROMIUM)")
    url = str(path) if str(path).startswith(("http://", "https://")) else Path(path).resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="gm-chromium-", ignore_cleanup_errors=True) as profile:
        proc, ws_url = _launch(binary, profile, timeout)
        s = None
        try:
            s = _Session(_WebSocket(ws_url, timeout), time.monotonic() + timeout)
            target = s.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            s.session = s.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                s.call(f"{domain}.enable")
            s.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
            s.events.clear()
            s.call("Page.navigate", {"url": url})
            s.wait("Page.loadEventFired")
            timing = _eval(s, "(() => { const e = performance.getEntriesByType('navigation')[0];"
                              " return [e.domContentLoadedEventEnd, e.loadEventStart]; })()")  # fmt: skip
            values = []
            for step in evaluate:
                expr, shot = (step, screenshot) if isinstance(step, str) else step
                values.append(_eval(s, expr))
                if not isinstance(step, str):
                    _screenshot(s, shot)
            if screenshot is not None:
                _screenshot(s, screenshot)
            _eval(s, "0")  # events raised by the expressions arrive before this answer
            return PageLoad(_errors(s.events), _requests(s.events, url), float(timing[0]), float(timing[1]), values)
        finally:
            _stop(proc, s)


def _screenshot(s: _Session, path: str | Path | None) -> None:
    png = s.call("Page.captureScreenshot", {"format": "png"})["data"]
    Path(str(path)).write_bytes(base64.b64decode(png))


def _stop(proc: subprocess.Popen[str], s: _Session | None) -> None:
    """Browser.close, then the browser's process group if it lingers."""
    if s is not None:
        with contextlib.suppress(Exception):
            s.ws.send(json.dumps({"id": 0, "method": "Browser.close"}))
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def _eval(s: _Session, expression: str) -> Any:
    res = s.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
    if "exceptionDetails" in res:
        raise RuntimeError(f"page script failed: {res['exceptionDetails'].get('exception', {}).get('description', res)}")
    return res.get("result", {}).get("value")


def _errors(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in events:
        p = e.get("params", {})
        if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif e["method"] == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append(d.get("exception", {}).get("description") or d.get("text", "exception"))
        elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append(f"{p['entry'].get('text', '')} {p['entry'].get('url', '')}".strip())
    return out


def _requests(events: list[dict[str, Any]], url: str) -> list[str]:
    return [
        e["params"]["request"]["url"]
        for e in events
        if e["method"] == "Network.requestWillBeSent" and e["params"]["request"]["url"] != url
    ]
