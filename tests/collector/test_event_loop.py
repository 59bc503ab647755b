"""collect's event loop (gym_metrics/_util/aio.py run_fast): uvloop's where installed (a
dependency off Windows, so here), asyncio's when GYM_METRICS_EVENT_LOOP=asyncio says so."""

from __future__ import annotations

import asyncio

import pytest

from gym_metrics._util.aio import run_fast


async def loop_module() -> str:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop()).__module__


def test_collect_runs_on_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GYM_METRICS_EVENT_LOOP", raising=False)
    assert run_fast(loop_module()).startswith("uvloop")


def test_asyncio_loop_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GYM_METRICS_EVENT_LOOP", "asyncio")
    assert run_fast(loop_module()).startswith("asyncio")


def test_the_cli_collect_goes_through_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from gym_metrics.cli import _collect

    seen: list[str] = []

    async def main() -> int:
        seen.append(await loop_module())
        return 7

    monkeypatch.delenv("GYM_METRICS_EVENT_LOOP", raising=False)
    assert _collect.run_keeping_result(main()) == 7
    assert seen == [run_fast(loop_module())]
