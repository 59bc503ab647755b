"""A NeMo Gym config gym-metrics cannot run as written is an error naming its file, block and
field (exit 2), never an internal error, a silently different run, or a server left behind:
a mandatory value left `???` (served as the text "???"), an agent block whose `${...}` does not
resolve (run with the text), an entrypoint that raises as it loads, a block whose fields are no
mapping, a `--set` of a field the config does not have (dropped) or that is not YAML, a
`--server` URL whose port is no number, a composition whose merge fails, a `_delete_key` list
(deleted nothing); `max_steps` given as text (`${oc.env:...}`) is read as NeMo Gym reads it;
the environment `collect --benchmark` serves for its run dies with it, SIGKILL too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gym_metrics.errors import InvalidInputError
from gym_metrics.nemo_gym import load_config_server
from gym_metrics.nemo_gym._agents import AgentCodes
from gym_metrics.nemo_gym._compose import compose

APP = """
from gym_metrics.nemo_gym.base_resources_server import BaseResourcesServerConfig, BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer
class NeedsConfig(BaseResourcesServerConfig):
    judge_prompt: str = "default"
    judge: dict = {}
class NeedsServer(SimpleResourcesServer):
    config: NeedsConfig
    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        return BaseVerifyResponse(**body.model_dump(), reward=1.0)
"""


def tree(tmp_path: Path, config: str, app: str = APP, name: str = "needs") -> Path:
    """A NeMo Gym tree of one environment (a name of its own where its code differs: an
    environment's module is imported once per process, as `resources_servers.<name>.app`)."""
    folder = tmp_path / "resources_servers" / name
    (folder / "configs").mkdir(parents=True)
    (folder / "app.py").write_text(app)
    path = folder / "configs" / "needs.yaml"
    path.write_text(config)
    return path


def refused(call: object) -> InvalidInputError:
    with pytest.raises(InvalidInputError) as caught:
        call()  # type: ignore[operator]
    return caught.value


def test_a_mandatory_value_left_unset_is_refused_unless_set(tmp_path: Path) -> None:
    path = tree(tmp_path, "needs:\n  resources_servers:\n    needs:\n      entrypoint: app.py\n      judge_prompt: ???\n")
    error = refused(lambda: load_config_server(path))
    assert error.message == "a config value is not given"
    assert [(v.field, v.description) for v in error.violations] == [("needs.judge_prompt", f"{path}: ??? (give it: --set judge_prompt=VALUE)")]
    assert load_config_server(path, overrides=["judge_prompt=be fair"]).config.judge_prompt == "be fair"  # type: ignore[attr-defined]


def test_set_refuses_a_field_the_config_lacks_and_sets_a_nested_one(tmp_path: Path) -> None:
    path = tree(tmp_path, "needs:\n  resources_servers:\n    needs:\n      entrypoint: app.py\n")
    error = refused(lambda: load_config_server(path, overrides=["judge_promt=x"]))
    assert "'judge_promt': NeedsServer's config has no such field (did you mean 'judge_prompt'?)" in str(error)
    assert load_config_server(path, overrides=["judge.model=m1"]).config.judge == {"model": "m1"}  # type: ignore[attr-defined]
    assert "the value is not YAML" in str(refused(lambda: load_config_server(path, overrides=["judge_prompt=["])))
    assert "the port is not a number" in str(refused(lambda: load_config_server(path, servers={"judge": "http://127.0.0.1:notaport"})))


def test_an_entrypoint_that_raises_and_fields_that_are_no_mapping_are_named(tmp_path: Path) -> None:
    raising = tree(tmp_path / "a", "boom:\n  resources_servers:\n    boom:\n      entrypoint: app.py\n", app="raise RuntimeError('boom at import')\n", name="boom")
    assert "RuntimeError: boom at import" in str(refused(lambda: load_config_server(raising)))
    listed = tree(tmp_path / "b", "needs:\n  resources_servers:\n    needs:\n      - entrypoint\n")
    error = refused(lambda: load_config_server(listed))
    assert error.violations[0].field == "needs.resources_servers.needs" and "list, expected the server's fields" in error.violations[0].description


def test_compositions_that_cannot_merge_or_delete_are_named(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("block:\n  items: [1, 2]\n")
    merged = tmp_path / "merged.yaml"
    merged.write_text(f"config_paths: [{tmp_path / 'base.yaml'}]\nblock:\n  items: {{a: 1}}\n")
    error = refused(lambda: compose(merged, roots=[tmp_path]))
    assert error.message == "the config does not compose" and "ConfigTypeError: Cannot merge DictConfig with ListConfig" in str(error)  # OmegaConf 2.3's words
    deleting = tmp_path / "deleting.yaml"
    deleting.write_text("block:\n  a: 1\n  b: 2\n  _delete_key: [a, b]\n")
    assert "expected the keys as text, comma-separated" in str(refused(lambda: compose(deleting, roots=[tmp_path])))


def test_an_agent_block_that_does_not_resolve_or_leaves_a_value_unset_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ECHO_SYSTEM_PROMPT", raising=False)
    path = tmp_path / "agents.yaml"
    path.write_text("echo_agent:\n  responses_api_agents:\n    echo_agent:\n      entrypoint: app.py\n      system_prompt: ${oc.env:ECHO_SYSTEM_PROMPT}\n"
                    "other_agent:\n  responses_api_agents:\n    other_agent:\n      entrypoint: app.py\n      system_prompt: ???\n")  # fmt: skip
    codes = AgentCodes(path)
    assert "ECHO_SYSTEM_PROMPT" in str(refused(lambda: codes["echo_agent"]))
    assert refused(lambda: codes["other_agent"]).violations[0].field == "other_agent.system_prompt"


def test_max_steps_given_as_text_is_read_as_a_number(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gym_metrics.nemo_gym._compose import read_blocks
    from gym_metrics.nemo_gym._config import agent_max_steps

    monkeypatch.setenv("MAX_STEPS", "10")
    path = tmp_path / "c.yaml"
    path.write_text("a:\n  responses_api_agents:\n    simple_agent:\n      max_steps: ${oc.env:MAX_STEPS,3}\n      resources_server: {type: resources_servers, name: env}\n")
    assert agent_max_steps(read_blocks(path), "env", path) == {"a": 10}


def test_a_server_started_for_a_run_dies_with_it(tmp_path: Path) -> None:
    """`collect --benchmark` serves the benchmark's environment in a child; a collect killed
    with SIGKILL (no handler runs) left it serving, its port held, forever."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import subprocess, sys, time\n"
        "from gym_metrics._util.lifetime import with_parent\n"
        "child = subprocess.Popen([sys.executable, '-c', 'from gym_metrics._util.lifetime import die_with_parent; die_with_parent(); import time; time.sleep(60)'], env=with_parent())\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    time.sleep(1.0)  # the child has asked the kernel by now
    parent.send_signal(signal.SIGKILL)
    parent.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the child outlived its killed parent")


def test_extra_roots_are_searched_first_as_nemo_gym_searches_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NeMo Gym looks up a config's relative paths and env.yaml under $NEMO_GYM_EXTRA_ROOTS
    first, then the working directory (component_search_roots): a plugin shadows a built-in.
    gym-metrics ignored the variable when composing."""
    tree_root = tmp_path / "tree"
    (tree_root / "resources_servers" / "x" / "configs").mkdir(parents=True)
    (tree_root / "resources_servers" / "x" / "configs" / "base.yaml").write_text("x:\n  resources_servers:\n    x:\n      mode: built_in\n")
    top = tree_root / "top.yaml"
    top.write_text("config_paths: [resources_servers/x/configs/base.yaml]\n")
    plugin = tmp_path / "plugin"
    (plugin / "resources_servers" / "x" / "configs").mkdir(parents=True)
    (plugin / "resources_servers" / "x" / "configs" / "base.yaml").write_text("x:\n  resources_servers:\n    x:\n      mode: plugin\n")
    (plugin / "env.yaml").write_text("from_plugin_env: true\n")
    monkeypatch.chdir(tree_root)
    assert compose(top)["x"]["resources_servers"]["x"]["mode"] == "built_in"
    monkeypatch.setenv("NEMO_GYM_EXTRA_ROOTS", str(plugin))
    composed = compose(top)
    assert composed["x"]["resources_servers"]["x"]["mode"] == "plugin" and composed["from_plugin_env"] is True


def test_a_benchmark_config_that_is_not_yaml_is_said_in_the_listing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It was left out of `dataset nemo-gym-benchmark --list` without a word (NeMo Gym warns)."""
    from gym_metrics.nemo_gym._benchmark import benchmark_names

    (tmp_path / "benchmarks" / "broken").mkdir(parents=True)
    (tmp_path / "benchmarks" / "broken" / "config.yaml").write_text("a: [1, 2\n")
    assert benchmark_names(tmp_path) == []
    assert f"warning: skipping benchmark config {tmp_path / 'benchmarks/broken/config.yaml'} (ParserError" in capsys.readouterr().err
