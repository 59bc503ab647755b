"""NeMo Gym's `local` sandbox provider, run in gym-metrics' sandbox. NeMo Gym's runs each
command on the host, unconfined, in a workspace folder; this one keeps a small program
(_shell_driver.py) running in a sandbox of the server's provider (`serve --sandbox-provider`,
default the local pool, isolation `strict`: no bubblewrap, no sandbox, as everywhere else; one
pool for every sandbox of the server, at most its `max_open` at once) and runs each command
through it. What the commands see is the sandbox's: its own directory as the
workspace and its own /tmp, both kept for the sandbox's life, the system read-only, no network,
and an environment of the sandbox's variables, the spec's and the call's (none of the server's).
Its answers are NeMo Gym's: the same result fields, the same timeout result, the same refusal
of `user`. Output past GM_NEMO_OUTPUT_BYTES a stream is dropped (NeMo Gym keeps it all)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import secrets
import uuid
import weakref
from pathlib import Path
from typing import Any

from gym_metrics.nemo_gym.sandbox._types import SandboxCreateError, SandboxExecResult, SandboxHandle, SandboxResources, SandboxSpec, SandboxStatus
from gym_metrics.sandbox import Limits, Program, Provider, make_provider

log = logging.getLogger("gym_metrics.nemo_gym.sandbox")

TIMEOUT_RETURN_CODE = 125
"""NeMo Gym's sentinel for a command that did not run to its exit."""
OUTPUT_BYTES = 4 << 20
"""Kept of a command's stdout and of its stderr each."""
READ_BYTES = 64 << 20
"""The largest file a download takes."""
_DRIVER = (Path(__file__).with_name("_shell_driver.py")).read_text()
_EXITED = "the sandbox's program ended (a memory, CPU or lifetime limit, or `stop`)"


class _Driver:
    """The kept program's pipes: requests out, each answered by its nonce, at once."""

    def __init__(self, run: Any, provider: Provider) -> None:
        self.run = run
        self.provider: Provider | None = provider
        self.waiting: dict[bytes, asyncio.Future[dict[str, Any]]] = {}
        self.gone: str | None = None
        self.reader = asyncio.ensure_future(self._read())

    async def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.gone is not None:
            raise OSError(self.gone)
        nonce, data = secrets.token_hex(16).encode(), json.dumps(request).encode()
        answer = self.waiting[nonce] = asyncio.get_running_loop().create_future()
        try:
            self._send(nonce, data)
            await self.run.stdin.drain()
            return await answer
        except (ConnectionError, RuntimeError) as exc:
            raise OSError(f"{_EXITED}: {exc}") from None
        except asyncio.CancelledError:  # its caller went away: its command is killed, as NeMo Gym's local provider kills it
            if request["op"] == "exec" and self.gone is None:
                self._send(secrets.token_hex(16).encode(), json.dumps({"op": "kill", "nonce": nonce.decode()}).encode())
            raise
        finally:
            self.waiting.pop(nonce, None)

    def _send(self, nonce: bytes, data: bytes) -> None:
        self.run.stdin.write(b"%s %d\n" % (nonce, len(data)) + data)

    async def _read(self) -> None:
        most = 8 * max(OUTPUT_BYTES, READ_BYTES // 4) + 4096
        try:
            while True:
                header = await self.run.stdout.readline()
                if not header:
                    break
                nonce, size = header.split()
                if not 0 <= int(size) <= most:
                    raise ValueError(f"a reply of {int(size)} bytes")
                reply = json.loads(await self.run.stdout.readexactly(int(size)))
                waiter = self.waiting.get(nonce)
                if waiter is not None and not waiter.done() and isinstance(reply, dict):
                    waiter.set_result(reply)
            self.gone = _EXITED
        except (ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            self.gone = f"the sandbox's program broke its replies ({exc}); its state is gone"
        for waiter in self.waiting.values():
            if not waiter.done():
                waiter.set_exception(OSError(self.gone))

    async def close(self) -> None:
        """Stop the program, then give its place in the shared pool back (once)."""
        self.reader.cancel()
        provider, self.provider = self.provider, None
        await self.run.close()
        if provider is not None:
            await _Shared.give_back(provider)


def _raised(reply: dict[str, Any]) -> None:
    """The OSError (its subclass by name) or ValueError the driver reported, raised here."""
    if "raise" in reply:
        kind = {"ValueError": ValueError, **{c.__name__: c for c in (OSError, FileNotFoundError, FileExistsError, PermissionError,
                                                                     NotADirectoryError, IsADirectoryError)}}.get(reply["raise"], OSError)  # fmt: skip
        raise kind(str(reply.get("message")))


class LocalProvider:
    """NeMo Gym's `local` provider (its options: `workspace_root` is not used, the sandbox's
    own directory is the workspace; `shell`, `default_timeout_s`, `concurrency` as NeMo Gym's)."""

    name = "local"
    _semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, asyncio.Semaphore]] = weakref.WeakKeyDictionary()

    def __init__(self, workspace_root: str | None = None, shell: str = "/bin/bash", default_timeout_s: float = 180.0, concurrency: int = 8) -> None:
        if workspace_root:
            log.warning("gym-metrics' local sandbox provider ignores workspace_root %r: each sandbox's own directory is its workspace", workspace_root)
        self._shell = shell
        self._default_timeout_s = default_timeout_s
        self._concurrency = concurrency

    def _semaphore(self) -> asyncio.Semaphore:
        """Commands at once over every sandbox of this `concurrency` (NeMo Gym's bound), per loop."""
        per_loop = self._semaphores.setdefault(asyncio.get_running_loop(), {})
        return per_loop.setdefault(self._concurrency, asyncio.Semaphore(self._concurrency))

    async def create(self, spec: SandboxSpec) -> SandboxHandle:
        ignored = [name for name, value in (("image", spec.image), ("ttl_s", spec.ttl_s), ("ports", tuple(spec.ports))) if value]
        if ignored:
            log.warning("the local sandbox provider ignores %s: commands run in gym-metrics' sandbox on this host's system", ", ".join(ignored))
        resources = spec.resources if isinstance(spec.resources, SandboxResources) else SandboxResources.from_mapping(spec.resources)
        limits = Limits(
            wall_s=float(spec.ttl_s or 24 * 3600), cpu_s=24 * 3600, memory_mb=resources.memory_mib or 2048,
            disk_mb=(resources.disk_gib or 1) * 1024, inodes=200_000, processes=256, open_files=1024, file_size_mb=READ_BYTES >> 20,
        )  # fmt: skip
        env = {"GM_NEMO_OUTPUT_BYTES": str(OUTPUT_BYTES), "GM_NEMO_READ_BYTES": str(READ_BYTES), **spec.env}
        sandbox_id = f"local-{uuid.uuid4().hex[:12]}"
        provider = _Shared.take()  # fails closed (no isolation, no provider) before anything runs
        try:
            driver = _Driver(await provider.open(Program(python=_DRIVER, env=env), limits, client=sandbox_id), provider)
        except BaseException:
            await _Shared.give_back(provider)
            raise
        if spec.workdir:
            try:
                _raised(await driver.ask({"op": "workspace", "path": spec.workdir}))
            except (OSError, ValueError) as exc:
                await driver.close()
                raise SandboxCreateError(f"the sandbox cannot make its workdir {spec.workdir!r}: {exc} (outside /tmp and its own directory the sandbox's system is read-only)") from None
        return SandboxHandle(sandbox_id=sandbox_id, provider_name=self.name, raw=driver)

    async def exec(self, handle: SandboxHandle, command: str, *, cwd: str | None = None, env: dict[str, str] | None = None,
                   timeout_s: int | float | None = None, user: str | int | None = None) -> SandboxExecResult:  # fmt: skip
        """NeMo Gym's answer for the command; at its timeout the command and what it started are killed."""
        if user is not None:
            raise ValueError("The local sandbox provider cannot run commands as another user")
        timeout = timeout_s if timeout_s is not None else self._default_timeout_s
        request = {"op": "exec", "command": command, "cwd": cwd, "env": dict(env or {}), "timeout_s": float(timeout), "shell": self._shell}
        async with self._semaphore():
            reply = await handle.raw.ask(request)
        _raised(reply)
        if reply["timed_out"]:
            return SandboxExecResult(stdout=None, stderr=f"local command timed out after {timeout:g}s", return_code=TIMEOUT_RETURN_CODE, error_type="timeout")
        return SandboxExecResult(stdout=reply["stdout"], stderr=reply["stderr"], return_code=int(reply["return_code"]), error_type=None)

    async def upload_file(self, handle: SandboxHandle, source_path: Path, target_path: str) -> None:
        data = await asyncio.to_thread(Path(source_path).read_bytes)
        _raised(await handle.raw.ask({"op": "write", "path": target_path, "data": base64.b64encode(data).decode()}))

    async def download_file(self, handle: SandboxHandle, source_path: str, target_path: Path) -> None:
        reply = await handle.raw.ask({"op": "read", "path": source_path})
        _raised(reply)
        target = Path(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(target.write_bytes, base64.b64decode(reply["data"]))

    async def status(self, handle: SandboxHandle) -> SandboxStatus:
        return SandboxStatus.RUNNING if handle.raw.gone is None else SandboxStatus.STOPPED

    async def close(self, handle: SandboxHandle) -> None:
        """Stop its program: its directory, its /tmp and what it left running go with it."""
        await handle.raw.close()

    async def aclose(self) -> None:
        """Nothing: each sandbox gives its place in the shared pool back when it is closed."""


class _Shared:
    """One gym-metrics provider per event loop for every open sandbox (its launchers shared; at
    most its `max_open` sandboxes at once, `serve --sandbox-option max_open=N`), closed when
    the last of them is."""

    _held: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Provider, int]] = weakref.WeakKeyDictionary()

    @classmethod
    def take(cls) -> Provider:
        loop = asyncio.get_running_loop()
        provider, users = cls._held.get(loop) or (make_provider(), 0)
        cls._held[loop] = (provider, users + 1)
        return provider

    @classmethod
    async def give_back(cls, provider: Provider) -> None:
        loop = asyncio.get_running_loop()
        held, users = cls._held.get(loop, (None, 0))
        if held is not provider:  # (taken on another loop: its own)
            await provider.aclose()
        elif users > 1:
            cls._held[loop] = (held, users - 1)
        else:
            del cls._held[loop]
            await provider.aclose()
