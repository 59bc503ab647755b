"""NeMo Gym's `AsyncSandbox`: one sandbox of a provider (made from a `{name: options}` config
and then its own, closed with the sandbox), started from a SandboxSpec (its `files` written
in), commands run in it with the spec's workdir as their default directory, stopped once."""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from gym_metrics.nemo_gym.sandbox._registry import create_provider
from gym_metrics.nemo_gym.sandbox._types import SandboxExecResult, SandboxHandle, SandboxSpec, SandboxStatus


class AsyncSandbox:
    """`owns_provider=False`: the caller closes the provider, after all its sandboxes stopped."""

    def __init__(self, provider: Mapping[str, Any] | Any, spec: SandboxSpec | None = None, *, owns_provider: bool = True) -> None:
        self._provider = create_provider(provider) if isinstance(provider, Mapping) else provider
        self._owns_provider = owns_provider
        self._spec = spec
        self._handle: SandboxHandle | None = None
        self._stopped = True
        self._closed = False

    def _require_handle(self) -> SandboxHandle:
        if self._handle is None or self._stopped:
            raise RuntimeError("Sandbox has not been started")
        return self._handle

    async def start(self, spec: SandboxSpec | None = None) -> AsyncSandbox:
        if self._closed:
            raise RuntimeError("Sandbox has been stopped")
        if self._handle is not None and not self._stopped:
            raise RuntimeError("Sandbox is already started")
        chosen = spec if spec is not None else self._spec
        if chosen is None:
            raise ValueError("Sandbox.start() requires a SandboxSpec")
        self._handle = await self._provider.create(chosen)
        self._spec, self._stopped = chosen, False
        try:
            if chosen.files:
                with tempfile.TemporaryDirectory(prefix="gm-nemo-sandbox-upload-") as folder:
                    for index, (target, text) in enumerate(chosen.files.items()):
                        source = Path(folder) / f"file-{index}"
                        source.write_text(text, encoding="utf-8")
                        await self._provider.upload_file(self._handle, source, target)
        except BaseException:
            await self.stop()
            raise
        return self

    async def start_with_setup(self, spec: SandboxSpec | None, setup: Callable[[AsyncSandbox], Awaitable[None]]) -> AsyncSandbox:
        """Start, then `setup(self)`; a setup that raises stops the sandbox first."""
        await self.start(spec)
        try:
            await setup(self)
        except BaseException:
            await self.stop()
            raise
        return self

    async def exec(self, command: str, *, cwd: str | None = None, env: dict[str, str] | None = None, timeout_s: int | float | None = 180,
                   user: str | int | None = None, preserve_background_services: bool = False) -> SandboxExecResult:  # fmt: skip
        """`preserve_background_services`: the local provider has no such mode (NeMo Gym's runs
        an ordinary command then too)."""
        workdir = self._spec.workdir if self._spec is not None else None
        return await self._provider.exec(self._require_handle(), command, cwd=cwd if cwd is not None else workdir, env=env, timeout_s=timeout_s, user=user)

    async def upload(self, local_path: Path | str, remote_path: str) -> None:
        await self._provider.upload_file(self._require_handle(), Path(local_path), remote_path)

    async def download(self, remote_path: str, local_path: Path | str) -> None:
        await self._provider.download_file(self._require_handle(), remote_path, Path(local_path))

    async def status(self) -> SandboxStatus:
        if self._handle is None:
            return SandboxStatus.UNKNOWN
        if self._stopped:
            return SandboxStatus.STOPPED
        status: SandboxStatus = await self._provider.status(self._handle)
        return status

    async def stop(self) -> None:
        """Close the sandbox (and the provider it owns); again: nothing."""
        if self._closed:
            return
        if self._handle is not None and not self._stopped:
            await self._provider.close(self._handle)
            self._stopped = True
        if self._owns_provider:
            await self._provider.aclose()
        self._closed = True

    async def __aenter__(self) -> AsyncSandbox:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
