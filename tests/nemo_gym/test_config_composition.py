"""NeMo Gym's config composition (`config_paths`, `_inherit_from`, `_copy`, `_delete_key`) as
gym_metrics.nemo_gym composes it, held to NeMo Gym 0.7.0's own parser: every benchmark and
resources server config of the wheel, and the cases of tests/data/nemo_gym_configs/tree
(recorded by scripts/make_nemo_config_reference.py); then a benchmark config served as NeMo Gym
runs it, and bad configs named."""

from __future__ import annotations

import importlib.util
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from gym_metrics._transport.client import ResourcesClient
from gym_metrics.errors import InvalidInputError
from gym_metrics.nemo_gym import environment_folder, load_config_server
from gym_metrics.nemo_gym._compose import compose, parse, refuse_dangling_refs, search_roots
from gym_metrics.nemo_gym.global_config import GlobalConfigDictParserConfig

DATA = Path(__file__).parents[1] / "data" / "nemo_gym_configs"
TREE = DATA / "tree"
REFERENCE = json.loads((DATA / "reference.json").read_text())


def _recorder() -> Any:
    path = Path(__file__).parents[2] / "scripts" / "make_nemo_config_reference.py"
    spec = importlib.util.spec_from_file_location("make_nemo_config_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDER = _recorder()


def ours(path: Path, root: Path) -> dict[str, Any]:
    """Our composition of `path` as the recorder ran NeMo Gym's (no model, no env.yaml), summarised alike."""
    document = parse({**GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT, "config_paths": [str(path)]}, search_roots(root), None, root)
    return RECORDER.resolved_blocks(document)


def assert_same(path: str, found: dict[str, Any], expected: dict[str, Any], root: Path) -> None:
    mine = RECORDER.summary(found, root)
    assert mine["includes"] == expected["includes"], path
    theirs = expected["blocks"]
    differ = sorted(k for k in mine["blocks"].keys() & theirs.keys() if mine["blocks"][k] != theirs[k])
    assert not differ, f"{path}: blocks differ from NeMo Gym's: {differ}"
    assert not mine["blocks"].keys() - theirs.keys(), path
    # NeMo Gym adds an environment server for an agent that has none; nothing else is its own
    added = {k for k in theirs.keys() - mine["blocks"].keys() if theirs[k][1] != "environment_servers"}
    assert not added, f"{path}: NeMo Gym has blocks we do not: {added}"


@pytest.mark.parametrize("case", sorted(REFERENCE["cases"]))
def test_the_cases_compose_as_nemo_gym_composes_them(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(TREE)  # as recorded: the cases' relative entries start there
    found = ours(TREE / case, TREE)
    expected = REFERENCE["cases"][case]
    if "error" in expected:  # NeMo Gym refuses it once composed (a server it names is not defined): so do we, where we read it
        assert expected["error"] == "ServerRefNotFoundError", case
        with pytest.raises(InvalidInputError, match="not defined in the merged config"):
            refuse_dangling_refs(found, TREE / case)
        return
    assert_same(case, found, expected, TREE)


@pytest.mark.slow  # 10-26 s: on the default Python only (CI's time bound)
def test_the_wheels_configs_compose_as_nemo_gym_composes_them(ported: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """All 350 config files of the wheel (108 benchmarks), each block equal to NeMo Gym's."""
    with zipfile.ZipFile(ported.wheel) as wheel:
        wheel.extractall(tmp_path, [m for m in wheel.namelist() if m.endswith(".yaml")])  # what config_paths can name
    monkeypatch.chdir(tmp_path)
    compared = refused = 0
    for name, expected in sorted(REFERENCE["wheel"].items()):
        if "error" in expected:  # NeMo Gym refuses it (a server it names is not defined): nothing to compare
            refused += 1
            continue
        assert_same(name, ours(tmp_path / name, tmp_path), expected, tmp_path)
        compared += 1
    assert (compared, refused) == (314, 36)


def test_the_failure_kinds_are_nemo_gyms() -> None:
    from gym_metrics.nemo_gym.failure_kinds import FAILURE_KINDS, is_namespaced, is_registered, validate_failure_kind

    assert sorted(FAILURE_KINDS) == REFERENCE["failure_kinds"]
    assert is_registered("judge_failed") and not is_registered("judge_failed\n")
    assert is_namespaced("my_env:bad_answer") and not is_namespaced("my_env:bad_answer\n") and not is_namespaced("Bad:x")
    assert validate_failure_kind("whatever") == "whatever"


@pytest.fixture()
def tree(config_tree: Path) -> Path:
    return config_tree


def demo_rollout(text: str) -> dict[str, Any]:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "say 42"}]},
        "response": {
            "id": "r", "created_at": 0, "model": "m", "object": "response", "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": [], "output": [{"id": "m1", "type": "message", "role": "assistant", "status": "completed",
                                     "content": [{"type": "output_text", "text": text, "annotations": []}]}],
        },
        "expected": "42",
    }  # fmt: skip


def test_a_benchmark_config_builds_the_server_it_renames(tree: Path) -> None:
    """benchmarks/demo_bench names no environment folder: its resources server is the
    environment's block renamed by `_inherit_from`, run from `resources_servers/demo_env/`."""
    config = tree / "benchmarks" / "demo_bench" / "config.yaml"
    assert environment_folder(config) == tree / "resources_servers" / "demo_env"
    server = load_config_server(config)
    assert (server.config.name, server.config.label, server.config.reward_if_match) == ("demo_bench_resources_server", "bench", 0.5)
    assert server.config.extra == {"a": 1, "b": 20, "c": 30}
    assert server._agent_max_steps == {"demo_bench_simple_agent": 5}
    with pytest.raises(InvalidInputError, match="demo_env"):  # moved by _inherit_from: no longer in the config
        load_config_server(config, name="demo_env")


async def test_serve_runs_a_benchmark_config(tree: Path) -> None:
    from _transport_helpers import serve_process

    elsewhere = tree / "elsewhere"
    elsewhere.mkdir()
    with serve_process(str(Path("..") / "benchmarks" / "demo_bench" / "config.yaml"), cwd=elsewhere) as address:
        async with ResourcesClient(address) as client:
            answers = [await client.verify(demo_rollout(text)) for text in ("it is 42", "no")]
    assert [(a["reward"], a["label"]) for a in answers] == [(0.5, "bench"), (0.0, "bench")]


def test_env_yaml_is_read_as_nemo_gym_reads_it(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tree's env.yaml (NeMo Gym's place for `policy_base_url` and the like) over the configs."""
    (tree / "env.yaml").write_text("policy_base_url: http://127.0.0.1:9/v1\nshared:\n  level: from_env_yaml\n")
    monkeypatch.chdir(tree / "benchmarks")
    document = compose(tree / "benchmarks" / "demo_plain" / "config.yaml")
    assert document.demo_judge.responses_api_models.openai_model.openai_base_url == "http://127.0.0.1:9/v1"
    assert document.shared.level == "from_env_yaml"


@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        ("config_paths:\n  - resources_servers/nowhere.yaml\n", "config_paths: resources_servers/nowhere.yaml", "no such file"),
        ("config_paths: resources_servers/demo_env/configs/demo_env.yaml\n", "config_paths", "is not a list of paths"),
        ("a:\n  _inherit_from: b.c\n", "_inherit_from", "b.c: no 'b' there"),
        ("b: 1\na:\n  _inherit_from: b.c\n", "_inherit_from", "b.c: 'b' is not a mapping"),  # NeMo Gym: AttributeError (it was ours too)
        ("b:\n  x: 1\na:\n  _inherit_from: b\n  _delete_key: y\n", "_delete_key", "a: no 'y' in it or in b"),
        ("config_paths:\n  - resources_servers/demo_env/configs/demo_env.yaml\nx: [1\n", "config", "not valid YAML"),
    ],
)
def test_bad_compositions_name_what_is_wrong(tree: Path, text: str, where: str, what: str) -> None:
    config = tree / "benchmarks" / "bad.yaml"
    config.write_text(text)
    with pytest.raises(InvalidInputError) as raised:
        load_config_server(config)
    assert (raised.value.violations[0].field, what in str(raised.value)) == (where, True)


def test_the_parser_environments_call_composes_as_nemo_gyms(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`GlobalConfigDictParser().parse(...)`, as aegis_v4_safety's and equivalence_llm_judge's
    verifier fixtures call it, gives NeMo Gym's blocks."""
    from omegaconf import OmegaConf

    from gym_metrics.nemo_gym.global_config import GlobalConfigDictParser

    monkeypatch.chdir(TREE)
    path = "benchmarks/demo_bench/config.yaml"
    initial = OmegaConf.merge(GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT, {"config_paths": [str(TREE / path)]})
    document = GlobalConfigDictParser().parse(
        GlobalConfigDictParserConfig(initial_global_config_dict=initial, skip_load_from_cli=True, skip_load_from_dotenv=True, offline=True)
    )
    assert_same(path, RECORDER.resolved_blocks(document), REFERENCE["cases"][path], TREE)


def test_a_relative_path_is_read_under_the_working_directory_then_the_served_tree(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`nemo_gym._resolve_under_cwd_or_install` (tavily_search's exclusion list), as prompt
    templates and config entries are looked up."""
    from gym_metrics.nemo_gym import _resolve_under_cwd_or_install
    from gym_metrics.nemo_gym.global_config import set_parent_dir

    set_parent_dir(tree)
    elsewhere = tree / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert _resolve_under_cwd_or_install("benchmarks/demo_plain/config.yaml") == tree / "benchmarks" / "demo_plain" / "config.yaml"
    (elsewhere / "benchmarks" / "demo_plain").mkdir(parents=True)
    (elsewhere / "benchmarks" / "demo_plain" / "config.yaml").write_text("{}")
    assert _resolve_under_cwd_or_install("benchmarks/demo_plain/config.yaml") == Path.cwd() / "benchmarks" / "demo_plain" / "config.yaml"
    assert _resolve_under_cwd_or_install("nowhere.txt") == Path.cwd() / "nowhere.txt"
    assert _resolve_under_cwd_or_install("benchmarks", validator=lambda p: (p / "demo_bench").is_dir()) == tree / "benchmarks"


def test_serve_dump_config_prints_the_config_it_would_serve(tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`serve CONFIG --dump-config` (NeMo Gym's `gym env resolve`): composed, resolved, `--set`
    applied to the served block, and every value under a key holding token, key or header
    masked (a list whole), as NeMo Gym masks them; nothing is served."""
    import yaml

    from gym_metrics.cli import main as cli_main

    secret = "sk-live-0123456789abcdef"
    (tree / "env.yaml").write_text(f"policy_base_url: http://127.0.0.1:9/v1\npolicy_api_key: {secret}\n"
                                   f"extra_headers: [{secret}]\ntokens:\n  nested: {{api_token: {secret}, kept: 1}}\n")  # fmt: skip
    monkeypatch.chdir(tree)
    assert cli_main(["serve", "benchmarks/demo_bench/config.yaml", "--dump-config", "--set", "label=dumped"]) == 0
    printed = capsys.readouterr().out
    assert secret not in printed
    dumped = yaml.safe_load(printed)
    assert dumped["demo_bench_resources_server"]["resources_servers"]["demo_env"]["label"] == "dumped"
    assert dumped["demo_bench_resources_server"]["resources_servers"]["demo_env"]["extra"] == {"a": 1, "b": 20, "c": 30}
    assert dumped["demo_judge"]["responses_api_models"]["openai_model"]["openai_base_url"] == "http://127.0.0.1:9/v1"
    assert (dumped["policy_api_key"], dumped["extra_headers"], dumped["tokens"]) == ("****", ["****"], {"nested": {"api_token": "****", "kept": 1}})
    assert cli_main(["serve", "math_exact", "--dump-config"]) == 2 and "give a config YAML target" in capsys.readouterr().err


@pytest.mark.parametrize("offline", [True, False])
def test_the_parser_gives_each_server_a_host_and_port_as_nemo_gyms(tree: Path, monkeypatch: pytest.MonkeyPatch, offline: bool) -> None:
    """A verifier fixture builds its server's config from the parsed blocks: NeMo Gym's parser
    fills a missing host (127.0.0.1) and port (-1 offline, else a free one), which the config
    model requires."""
    from omegaconf import OmegaConf

    from gym_metrics.nemo_gym.global_config import GlobalConfigDictParser

    monkeypatch.chdir(TREE)
    initial = OmegaConf.merge(GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT, {"config_paths": [str(TREE / "benchmarks/demo_bench/config.yaml")]})
    document = GlobalConfigDictParser().parse(
        GlobalConfigDictParserConfig(initial_global_config_dict=initial, skip_load_from_dotenv=True, offline=offline)
    )
    servers = [next(iter(block.values())) for block in document.values() if OmegaConf.is_dict(block) and len(block) == 1 and next(iter(block)).endswith("_servers")]
    addresses = [(s["host"], s["port"]) for inner in servers for s in inner.values()]
    assert addresses and all(host == "127.0.0.1" for host, _ in addresses)
    assert all(port == -1 for _, port in addresses) if offline else all(isinstance(port, int) and port > 0 for _, port in addresses)


def test_get_hf_token_reads_the_config_s_token() -> None:
    """Benchmarks' prepare scripts (aalcr, swebench_pro) read the token NeMo Gym's way."""
    from gym_metrics.nemo_gym.global_config import get_global_config_dict, get_hf_token, set_global_config_dict

    before = dict(get_global_config_dict())
    try:
        set_global_config_dict({})
        assert get_hf_token() is None
        set_global_config_dict({"hf_token": "hf_test"})
        assert get_hf_token() == "hf_test"
    finally:
        set_global_config_dict(before)
