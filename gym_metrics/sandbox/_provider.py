"""What runs programs: the calls an environment (and a kept interpreter) uses, whoever
provides them (docs/sandbox.md#providers). `Pool` is the local provider; `DockerProvider` runs
each program in a container; providers are chosen by name (_providers.py)."""

from __future__ import annotations

import asyncio
from typing import Protocol, runtime_checkable

from gym_metrics.sandbox._program import Limits, Program, RunResult


class KeptProgram(Protocol):
    """A program a provider keeps running (a session's interpreter): its pipes, until `close`."""

    stdin: asyncio.StreamWriter
    stdout: asyncio.StreamReader
    stderr: asyncio.StreamReader

    async def close(self) -> None:
        """Stop it and free what it held (idempotent)."""
        ...


@runtime_checkable
class Provider(Protocol):
    async def run(self, program: Program, limits: Limits = ...) -> RunResult:
        """Run `program` to its end under `limits`."""
        ...

    async def open(self, program: Program, limits: Limits = ..., *, client: str = "") -> KeptProgram:
        """Start `program` kept running, counted against `client`'s share of the places for
        such programs (the session's Session.client)."""
        ...

    async def aclose(self) -> None:
        """Stop what it started."""
        ...
