"""What runs programs: the calls an environment uses, whoever provides them (docs/sandbox.md).
`Pool` is the local provider; `DockerProvider` runs each program in a container."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from gym_metrics.sandbox._program import Limits, Program, RunResult


@runtime_checkable
class Provider(Protocol):
    async def run(self, program: Program, limits: Limits) -> RunResult:
        """Run `program` to its end under `limits`."""
        ...

    async def open(self, program: Program, limits: Limits) -> Any:
        """Start `program` kept running (a session's interpreter): an object with `stdin`
        (an asyncio StreamWriter), `stdout`, `stderr` (StreamReaders) and `async close()`."""
        ...

    async def aclose(self) -> None:
        """Stop what it started."""
        ...
