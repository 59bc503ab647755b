"""NeMo Gym's sandbox API (`gym_metrics.nemo_gym.sandbox`, what a ported environment imports for
`nemo_gym.sandbox`) on gym-metrics' isolated sandbox: its `local` provider's answers as NeMo
Gym's (fields, timeout result, `user` refused, spec files and workdir, relative paths), the
commands confined (no server environment, no host /tmp, nothing left after stop), and fail
closed where the host cannot isolate. The records and config resolution as NeMo Gym's."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gym_metrics import ResourcesClient
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.nemo_gym import load_config_server
from gym_metrics.nemo_gym.sandbox import (
    AsyncSandbox,
    SandboxCreateError,
    SandboxExecResult,
    SandboxResources,
    SandboxSpec,
    SandboxStatus,
    create_provider,
    resolve_provider_config,
    resolve_provider_metadata,
)
from gym_metrics.nemo_gym.sandbox.utils import CPU_CAP_ENV_VARS, cpu_cap_env
from gym_metrics.sandbox import SandboxUnavailableError
from gym_metrics.targets import ModelTargetConfig
from gym_metrics.testing import ScriptedPolicyServer, replayed_script, serve_environment

DATA = Path(__file__).parents[1] / "data" / "nemo_gym_sandbox"

pytestmark = pytest.mark.timeout(60)


async def stdout(box: AsyncSandbox, command: str) -> str:
    result = await box.exec(command)
    assert result.stdout is not None, result
    return result.stdout


@pytest.fixture
async def started(sandbox: None) -> AsyncIterator[AsyncSandbox]:
    spec = SandboxSpec(files={"/tmp/driver.py": "import os\nprint('driver', os.environ['GIVEN'])\n"}, workdir="/tmp/work", env={"GIVEN": "by spec"})
    box = await AsyncSandbox({"local": {"default_timeout_s": 5}}, spec).start()
    yield box
    await box.stop()


async def test_a_command_answers_as_nemo_gyms_local_provider(started: AsyncSandbox) -> None:
    result = await started.exec("python3 /tmp/driver.py; echo $CALL; pwd; echo oops >&2; exit 3", env={"CALL": "by call"})
    assert result == SandboxExecResult(stdout="driver by spec\nby call\n/tmp/work\n", stderr="oops\n", return_code=3, error_type=None)
    assert not Path("/tmp/driver.py").exists() and not Path("/tmp/work").exists()  # the sandbox's /tmp, not the host's


async def test_files_outlive_each_command_and_relative_paths_start_at_the_workdir(started: AsyncSandbox, tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("uploaded")
    await started.upload(tmp_path / "in.txt", "sub/in.txt")
    await started.exec("cat sub/in.txt > out.txt; echo ' and changed' >> out.txt")
    await started.download("out.txt", tmp_path / "back" / "out.txt")
    assert (tmp_path / "back" / "out.txt").read_text() == "uploaded and changed\n"
    with pytest.raises(FileNotFoundError):
        await started.download("never.txt", tmp_path / "never.txt")


async def test_a_timeout_kills_the_command_and_what_it_started(started: AsyncSandbox) -> None:
    begun = time.monotonic()
    result = await started.exec("sleep 30 & sleep 30", timeout_s=0.5)
    assert result == SandboxExecResult(stdout=None, stderr="local command timed out after 0.5s", return_code=125, error_type="timeout")
    assert time.monotonic() - begun < 5
    assert await stdout(started, "pgrep -c sleep || true") == "0\n"


async def test_a_command_whose_caller_went_away_is_killed(started: AsyncSandbox) -> None:
    call = asyncio.ensure_future(started.exec("sleep 30 & sleep 30", timeout_s=60))
    await asyncio.sleep(0.5)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    for _ in range(50):  # the kill is on its way
        if await stdout(started, "pgrep -c sleep || true") == "0\n":
            break
        await asyncio.sleep(0.1)
    assert await stdout(started, "pgrep -c sleep || true") == "0\n"


async def test_commands_of_one_sandbox_run_at_once(started: AsyncSandbox) -> None:
    """The first command waits for a file only the second makes: run one after another, the
    first would time out."""
    waiting = started.exec("while [ ! -f go ]; do sleep 0.05; done; echo waited", timeout_s=20)
    maker = started.exec("sleep 0.2; touch go; echo made", timeout_s=20)
    results = await asyncio.gather(waiting, maker)
    assert [(r.return_code, r.stdout) for r in results] == [(0, "waited\n"), (0, "made\n")]


async def test_the_servers_environment_and_another_user_are_out_of_reach(started: AsyncSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GM_SERVER_SECRET", "do-not-leak")
    assert "GM_SERVER_SECRET" not in await stdout(started, "env")
    with pytest.raises(ValueError, match="cannot run commands as another user"):
        await started.exec("id", user="root")
    assert (await stdout(started, "touch /etc/x 2>&1; echo $?")).endswith("1\n")  # read-only system


async def test_stop_ends_it_and_is_idempotent(sandbox: None) -> None:
    box = await AsyncSandbox({"local": {}}, SandboxSpec()).start()
    assert await box.status() == SandboxStatus.RUNNING
    await box.exec("echo x > /tmp/kept")
    await box.stop()
    await box.stop()
    assert await box.status() == SandboxStatus.STOPPED
    with pytest.raises(RuntimeError, match="not been started"):
        await box.exec("true")
    again = await AsyncSandbox({"local": {}}, SandboxSpec()).start()
    try:
        assert (await stdout(again, "cat /tmp/kept 2>&1 || echo gone")).endswith("gone\n")
    finally:
        await again.stop()


async def test_a_workdir_it_cannot_make_fails_the_start_clearly(sandbox: None) -> None:
    with pytest.raises(SandboxCreateError, match="cannot make its workdir '/sandbox'.*read-only"):
        await AsyncSandbox({"local": {}}, SandboxSpec(workdir="/sandbox")).start()


async def test_without_isolation_nothing_starts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bubblewrap on it
    monkeypatch.delenv("GYM_METRICS_SANDBOX_ISOLATION", raising=False)
    with pytest.raises(SandboxUnavailableError):
        await AsyncSandbox({"local": {}}, SandboxSpec()).start()


def test_providers_by_name_as_nemo_gym_names_them() -> None:
    assert type(create_provider({"local": None})).__name__ == "LocalProvider"
    with pytest.raises(ValueError, match="'opensandbox' is NeMo Gym's and not ported.*local"):
        create_provider({"opensandbox": {"connection": {}}})
    with pytest.raises(ValueError, match="Unknown sandbox provider 'mine'. Available providers: local"):
        create_provider({"mine": {}})
    with pytest.raises(ValueError, match="exactly one provider name"):
        create_provider({"local": {}, "docker": {}})
    with pytest.raises(TypeError, match="'local' config must be a mapping"):
        create_provider({"local": 3})


def test_a_provider_reference_resolves_as_nemo_gyms() -> None:
    named = {"sandbox": {"local": {"concurrency": 2}, "default_metadata": {"sandbox-api": "local"}}, "other": {"x": 1}}
    assert resolve_provider_config("sandbox", named) == {"local": {"concurrency": 2}}
    assert resolve_provider_metadata("sandbox", named) == {"sandbox-api": "local"}
    assert resolve_provider_config({"local": {}}) == {"local": {}} and resolve_provider_metadata({"local": {}}) == {}
    with pytest.raises(ValueError, match="'missing' is not defined in the merged config.*Available sandbox configs: 'other', 'sandbox'"):
        resolve_provider_config("missing", named)
    with pytest.raises(ValueError, match="exactly one provider key"):
        resolve_provider_config({"local": {}, "docker": {}})
    with pytest.raises(TypeError, match="name reference"):
        resolve_provider_config(3)  # type: ignore[arg-type]


def test_the_records_check_what_nemo_gym_checks() -> None:
    assert SandboxSpec(resources={"cpu": "2", "memory_mib": 512}).resources == SandboxResources(cpu=2.0, memory_mib=512)
    given: list = ["8080", 22]  # a port from YAML may be text, as NeMo Gym takes it
    assert SandboxSpec(ports=given).ports == (8080, 22)
    with pytest.raises(ValueError, match="Unknown sandbox resource keys: ram"):
        SandboxResources.from_mapping({"ram": 1})
    for ports, message in (([True], "Invalid sandbox TCP port"), ([0], "between 1 and 65535"), ([80, 80], "Duplicate sandbox TCP port: 80")):
        with pytest.raises(ValueError, match=message):
            SandboxSpec(ports=list(ports))
    assert cpu_cap_env(None) == {} and cpu_cap_env(0.5) == dict.fromkeys(CPU_CAP_ENV_VARS, "1") and cpu_cap_env(4)["OMP_NUM_THREADS"] == "4"


async def test_litmus_agents_code_tool_runs_in_the_sandbox(sandbox: None, ported: Any, tmp_path: Path) -> None:
    """The wheel's litmus_agent, ported, with its sandbox on the local provider
    (litmus_agent_local.yaml): its tool replays a session's earlier cells in a driver it puts
    at /tmp, so state carries from call to call; the answers are NeMo Gym's own (checked
    against NeMo Gym itself by test_check_env.py where its venv is given). Its `/verify`
    route, which wraps verify to free the rollout's sandbox, is the one called."""
    folder = ported.folder("litmus_agent")
    shutil.copy(DATA / "litmus_agent_local.yaml", folder / "configs")
    server = load_config_server(folder / "configs" / "litmus_agent_local.yaml")
    rollouts = [json.loads(line) for line in (DATA / "litmus_agent_rollouts.jsonl").read_text().splitlines()]
    with ScriptedPolicyServer(replayed_script(rollouts)) as policy:
        target = ModelTargetConfig(url=policy.url, model="scripted", api="responses")
        async with serve_environment(server) as running, ResourcesClient(running.address) as client:
            rows = tmp_path / "rows.jsonl"
            rows.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "response"}) + "\n" for r in rollouts))
            result = await collect_async(client, rows, tmp_path / "out.jsonl", CollectOptions(target=target))
            assert server._sessions == {}  # its /verify route (not verify itself) frees each rollout's sandbox, as under NeMo Gym
    written = {r["expected_answer"]: r for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    outputs = {k: [i["output"] for i in r["response"]["output"] if i["type"] == "function_call_output"] for k, r in written.items()}
    assert outputs["3"] == ["", "3\n"]  # x kept from the first call
    assert outputs["18.02"][0].endswith("ZeroDivisionError: division by zero\n") and outputs["18.02"][1] == "True\n"
    assert outputs["carboxylic acid"] == [outputs["carboxylic acid"][0], "", "10\n"] and "SystemExit: 0" in outputs["carboxylic acid"][0]
    assert result.tool_calls == 7 and [written[k]["reward"] for k in ("3", "18.02", "true")] == [1.0, 1.0, 1.0]


async def test_sandboxes_share_one_bounded_pool(sandbox: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every sandbox takes a place of the server's one pool (`--sandbox-option max_open=N`): past
    it, a clear busy error; a stopped sandbox frees its place."""
    from gym_metrics.sandbox import SandboxBusyError

    monkeypatch.setenv("GYM_METRICS_SANDBOX_OPTIONS", '{"max_open": 2}')
    first, second = [await AsyncSandbox({"local": {}}, SandboxSpec()).start() for _ in range(2)]
    try:
        with pytest.raises(SandboxBusyError, match="max_open"):
            await AsyncSandbox({"local": {}}, SandboxSpec()).start()
        await first.stop()
        third = await AsyncSandbox({"local": {}}, SandboxSpec()).start()
        assert await stdout(third, "echo ok") == "ok\n"
        await third.stop()
    finally:
        await first.stop()
        await second.stop()


def test_a_borrowed_sandbox_is_described_as_nemo_gym_describes_it() -> None:
    """`sandbox.access` records refuse unknown fields; the `local` provider cannot be reconnected
    to from another process, so an environment's `isinstance(provider, ConnectableProvider)` is
    false (swebench_pro then keeps its sandbox to itself), as for NeMo Gym's `local` provider."""
    import pydantic

    from gym_metrics.nemo_gym.sandbox import LocalProvider
    from gym_metrics.nemo_gym.sandbox.access import DirectSandboxConnection, SandboxAccess
    from gym_metrics.nemo_gym.sandbox.providers.base import ConnectableProvider

    access = SandboxAccess(connection=DirectSandboxConnection(provider_config_ref="docker", descriptor={"id": "abc"}), workdir="/w")
    assert access.model_dump() == {"connection": {"kind": "direct", "provider_config_ref": "docker", "descriptor": {"id": "abc"}}, "workdir": "/w"}
    with pytest.raises(pydantic.ValidationError):
        SandboxAccess(connection=access.connection, workdir="/w", lease="x")  # type: ignore[call-arg]

    class Reconnectable:
        async def serialize_handle(self, handle: object, *, scope: str | None = None) -> dict[str, object]:
            return {}

        async def connect(self, descriptor: object) -> object:
            return object()

    assert isinstance(Reconnectable(), ConnectableProvider) and not isinstance(LocalProvider(), ConnectableProvider)
