"""The porting layer on a NeMo Gym-style environment written for the tests (envs/echo_env): the
config YAML builds the server (fields, `name`, `model_post_init`, `--set`), request and response
models keep and drop fields as NeMo Gym's do, `verify(self, request, body)` gets a session, a
judge failure masks the rollout, and bad configs get errors naming what is wrong."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from gym_metrics._transport.client import ResourcesClient
from gym_metrics._transport.server import ServerConfig, start_server
from gym_metrics.errors import InvalidInputError
from gym_metrics.nemo_gym import load_config_server
from gym_metrics.nemo_gym.port import port_folder, rewrite_imports

ECHO = Path(__file__).parent / "envs" / "echo_env" / "configs" / "echo_env.yaml"


def rollout(text: str, expected: str = "yes", **extra: object) -> dict[str, object]:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "say yes!"}]},
        "response": {
            "id": "resp_1", "created_at": 0, "model": "m", "object": "response", "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [],
            "output": [{"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}],
        },
        "expected_answer": expected,
        **extra,
    }  # fmt: skip


def test_the_config_builds_the_server() -> None:
    env = load_config_server(ECHO)
    assert type(env).__name__ == "EchoServer" and env.config.name == "echo_env" and env.config.expected_suffix == "!"
    assert env.posts == 1 and env.server_info()["name"] == "echo_env"
    assert "verified" not in env.config.model_dump()  # metadata keys are not fields
    assert load_config_server(ECHO, overrides=["bonus=0.5", "expected_suffix=."]).config.expected_suffix == "."


async def test_verify_reads_the_typed_response_and_keeps_nemo_gyms_fields() -> None:
    env = load_config_server(ECHO)
    reward, answer = await env.verify_json(json.dumps(rollout("yes!")))
    data = json.loads(answer)
    assert reward == 1.0 and data["answer"] == "yes!" and data["session_seen"] is True
    # a row scored before carries the old outputs and unknown fields: NeMo Gym's models drop
    # them, so `EchoResponse(**body.model_dump(), reward=...)` does not see them twice
    rescored = rollout("yes!", reward=0.0, answer="old", session_seen=False, unknown_field=3)
    reward, answer = await env.verify_json(json.dumps(rescored))
    assert reward == 1.0 and "unknown_field" not in json.loads(answer)
    assert (await env.verify_json(json.dumps(rollout("no"))))[0] == 0.0


async def test_a_judge_failure_scores_zero_and_masks_the_rollout() -> None:
    env = load_config_server(ECHO)
    reward, answer = await env.verify_json(json.dumps(rollout("judge down")))
    data = json.loads(answer)
    assert reward == 0.0 and data["mask_sample"] is True and data["failure_kind"] == "judge_failed"
    assert "HTTP 503" in data["failure_reason"]


async def test_served_from_the_config_over_grpc() -> None:
    server = await start_server(load_config_server(ECHO), ServerConfig(port=0, log_requests=False))
    try:
        async with ResourcesClient(server.address) as client:
            info = await client.server_info()
            results = [await client.verify(rollout(answer)) for answer in ("yes!", "nope")]
    finally:
        await server.stop(0)
    assert info.name == "echo_env"
    assert [r["reward"] for r in results] == [1.0, 0.0] and results[0]["answer"] == "yes!"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("other:\n  responses_api_agents:\n    a: {entrypoint: app.py}\n", "config"),
        ("a:\n  resources_servers:\n    x: {entrypoint: app.py}\nb:\n  resources_servers:\n    y: {entrypoint: app.py}\n", "name"),
        ("a:\n  resources_servers:\n    x: {entrypoint: missing.py}\n", "entrypoint"),
        ("a: [unclosed\n", "config"),
    ],
)
def test_bad_configs_name_what_is_wrong(tmp_path: Path, text: str, field: str) -> None:
    (tmp_path / "configs").mkdir()
    config = tmp_path / "configs" / "c.yaml"
    config.write_text(text)
    with pytest.raises(InvalidInputError) as error:
        load_config_server(config)
    assert error.value.violations[0].field == field


def test_a_misspelt_environment_in_its_tree_is_named(tmp_path: Path) -> None:
    """`resources_servers: echo_envv:` in echo_env's own configs/ was served from echo_env (NeMo
    Gym's launcher looks for resources_servers/echo_envv and stops)."""
    shutil.copytree(ECHO.parents[1], tmp_path / "resources_servers" / "echo_env")
    config = tmp_path / "resources_servers" / "echo_env" / "configs" / "echo_env.yaml"
    config.write_text(config.read_text().replace("    echo_env:", "    echo_envv:", 1))
    with pytest.raises(InvalidInputError) as error:
        load_config_server(config)
    assert error.value.violations[0].field == "resources_servers"
    assert "resources_servers/echo_envv is not a folder (did you mean 'echo_env'?)" in error.value.violations[0].description


def test_a_field_of_the_wrong_type_is_named() -> None:
    with pytest.raises(InvalidInputError) as error:
        load_config_server(ECHO, overrides=["bonus=lots"])
    assert error.value.violations[0].field == "echo_env.bonus"
    with pytest.raises(InvalidInputError, match="unknown resources server"):
        load_config_server(ECHO, name="nope")


def test_interpolations_resolve_as_omegaconf_resolves_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`${oc.env:VAR,default}`, `${oc.select:...}` and references to other keys take their
    values, as NeMo Gym's servers resolve their blocks (a literal `${...}` string is never a
    field's value); a block that cannot resolve fails only where it is used, naming why."""
    shutil.copytree(ECHO.parents[1], tmp_path / "echo_env")
    config = tmp_path / "echo_env" / "configs" / "echo_env.yaml"
    config.write_text(
        "suffix: '?'\n"
        "echo_env:\n  resources_servers:\n    echo_env:\n      entrypoint: app.py\n"
        "      expected_suffix: ${oc.select:suffix,'.'}\n      bonus: ${oc.env:GM_TEST_BONUS,1e-6}\n"
        "unused:\n  key: ${oc.env:GM_TEST_NEVER_SET}\n"
    )
    monkeypatch.delenv("GM_TEST_BONUS", raising=False)
    env = load_config_server(config)
    assert (env.config.expected_suffix, env.config.bonus) == ("?", 1e-6)
    monkeypatch.setenv("GM_TEST_BONUS", "0.25")
    assert load_config_server(config).config.bonus == 0.25
    config.write_text(config.read_text().replace("${oc.env:GM_TEST_BONUS,1e-6}", "${oc.env:GM_TEST_NEVER_SET}"))
    with pytest.raises(InvalidInputError) as error:
        load_config_server(config)
    assert error.value.violations[0].field == "echo_env" and "GM_TEST_NEVER_SET" in error.value.violations[0].description


FILE_ENV = """
from pathlib import Path

from gym_metrics.nemo_gym.base_resources_server import BaseResourcesServerConfig, BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer


class FileConfig(BaseResourcesServerConfig):
    expected_fpath: str = "prompts/expected.txt"


class FileServer(SimpleResourcesServer):
    config: FileConfig

    def model_post_init(self, context: object) -> None:
        self._first = Path(self.config.expected_fpath).read_text()  # at start-up

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        expected = Path(self.config.expected_fpath).read_text()  # and while serving
        return BaseVerifyResponse(**body.model_dump(), reward=float(body.response.output_text == expected == self._first))
"""


@pytest.mark.parametrize("workers", ["1", "2"])
async def test_serve_runs_the_environment_in_its_folder(tmp_path: Path, workers: str) -> None:
    """NeMo Gym's launcher starts a server in its environment's folder (`cd`, then `python
    app.py`), so environments open their files by paths relative to it (terminus_judge's prompt
    template): `serve CONFIG` started anywhere runs it there too."""
    from _transport_helpers import serve_process

    env = tmp_path / "resources_servers" / "file_env"
    (env / "configs").mkdir(parents=True)
    (env / "prompts").mkdir()
    (env / "app.py").write_text(FILE_ENV)
    (env / "prompts" / "expected.txt").write_text("yes!")
    (env / "configs" / "file_env.yaml").write_text("file_env:\n  resources_servers:\n    file_env:\n      entrypoint: app.py\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    relative = Path("..") / "resources_servers" / "file_env" / "configs" / "file_env.yaml"  # given relative to where serve starts
    with serve_process(str(relative), "--workers", workers, cwd=elsewhere) as address:
        async with ResourcesClient(address) as client:
            rewards = [(await client.verify(rollout(answer)))["reward"] for answer in ("yes!", "no")]
    assert rewards == [1.0, 0.0]


JUDGED_ENV = """
from gym_metrics.nemo_gym.base_resources_server import BaseResourcesServerConfig, BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer
from gym_metrics.nemo_gym.judge import JudgeError, judge_failsafe


class JudgedServer(SimpleResourcesServer):
    config: BaseResourcesServerConfig
    routed: int = 0

    def setup_webserver(self):
        app = super().setup_webserver()  # its own /verify in place of the base one, as litmus_agent's
        app.router.routes = [r for r in app.router.routes if getattr(r, "path", None) != "/verify"]
        app.post("/verify")(judge_failsafe(self.verify_and_count))
        return app

    async def verify_and_count(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        self.routed += 1
        return await self.verify(body)

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        if body.response.output_text == "judge down":
            raise JudgeError("HTTP 503 from the judge")
        return BaseVerifyResponse(**body.model_dump(), reward=1.0)
"""


async def test_an_environments_own_verify_route_is_the_one_called(tmp_path: Path) -> None:
    """An environment that puts its own endpoint at `/verify` (litmus_agent frees a rollout's
    sandbox there) has it called, as NeMo Gym's agent posts to it; its `judge_failsafe` answers
    a failed judge with NeMo Gym's masked row."""
    env = tmp_path / "resources_servers" / "judged_env"
    (env / "configs").mkdir(parents=True)
    (env / "app.py").write_text(JUDGED_ENV)
    (env / "configs" / "judged_env.yaml").write_text("judged_env:\n  resources_servers:\n    judged_env:\n      entrypoint: app.py\n")
    environment = load_config_server(env / "configs" / "judged_env.yaml")
    server = await start_server(environment, ServerConfig(port=0, log_requests=False))
    try:
        async with ResourcesClient(server.address) as client:
            fine, down = [await client.verify(rollout(answer)) for answer in ("yes!", "judge down")]
    finally:
        await server.stop(0)
    assert environment.routed == 2
    assert (fine["reward"], fine.get("failure_kind"), fine["mask_sample"]) == (1.0, None, False)
    assert (down["reward"], down["mask_sample"], down["failure_kind"], down["failure_reason"]) == (0.0, True, "judge_failed", "HTTP 503 from the judge")


DECORATED_ENV = """
from gym_metrics.nemo_gym.base_resources_server import BaseResourcesServerConfig, BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer
from gym_metrics.nemo_gym.judge import JudgeError, judge_failsafe


class DecoratedServer(SimpleResourcesServer):
    config: BaseResourcesServerConfig

    @judge_failsafe
    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        if body.response.output_text == "judge down":
            raise JudgeError("HTTP 503 from the judge")
        return BaseVerifyResponse(**body.model_dump(), reward=1.0)
"""


async def test_a_verify_decorated_with_judge_failsafe_answers_the_masked_row(tmp_path: Path) -> None:
    """`@judge_failsafe` on the verify method itself: its failed judge comes back as the
    JSON response the decorator makes, read as NeMo Gym's route sends it."""
    env = tmp_path / "resources_servers" / "decorated_env"
    (env / "configs").mkdir(parents=True)
    (env / "app.py").write_text(DECORATED_ENV)
    (env / "configs" / "decorated_env.yaml").write_text("decorated_env:\n  resources_servers:\n    decorated_env:\n      entrypoint: app.py\n")
    server = await start_server(load_config_server(env / "configs" / "decorated_env.yaml"), ServerConfig(port=0, log_requests=False))
    try:
        async with ResourcesClient(server.address) as client:
            fine, down = [await client.verify(rollout(answer)) for answer in ("yes!", "judge down")]
    finally:
        await server.stop(0)
    assert (fine["reward"], fine["mask_sample"]) == (1.0, False)
    assert (down["reward"], down["mask_sample"], down["failure_kind"], down["_ng_failure_class"]) == (0.0, True, "judge_failed", "judge_failed")
    assert down["failure_reason"] == "HTTP 503 from the judge"


def test_the_porting_rule_rewrites_imports_and_nothing_else(tmp_path: Path) -> None:
    source = (
        "import nemo_gym\nfrom nemo_gym.base_resources_server import SimpleResourcesServer\n"
        "    from nemo_gym import reward_profile\nimport nemo_gymnastics\nx = 'from nemo_gym import y'\n"
    )
    assert rewrite_imports(source) == (
        "import gym_metrics.nemo_gym as nemo_gym\nfrom gym_metrics.nemo_gym.base_resources_server import SimpleResourcesServer\n"
        "    from gym_metrics.nemo_gym import reward_profile\nimport nemo_gymnastics\nx = 'from nemo_gym import y'\n"
    )
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text(source)
    (tmp_path / "src" / "data.jsonl").write_text("from nemo_gym import x\n")
    changed = port_folder(tmp_path / "src", tmp_path / "dst")
    assert changed == [tmp_path / "dst" / "app.py"]
    assert (tmp_path / "dst" / "data.jsonl").read_text() == "from nemo_gym import x\n"


def test_the_global_config_is_the_document_served() -> None:
    from gym_metrics.nemo_gym.global_config import get_first_server_config_dict, get_global_config_dict

    load_config_server(ECHO)
    document = get_global_config_dict()
    assert set(document) == {"echo_env", "echo_env_simple_agent", "config_paths", "results_dir", "cache_dir", "policy_model"}  # as NeMo Gym's
    assert get_first_server_config_dict(document, "echo_env")["expected_suffix"] == "!"


def test_the_tree_paths_follow_the_config_served(tmp_path: Path) -> None:
    import gym_metrics.nemo_gym as nemo_gym

    env_dir = tmp_path / "resources_servers" / "echo_env"
    port_folder(ECHO.parents[1], env_dir)
    load_config_server(env_dir / "configs" / "echo_env.yaml")
    assert nemo_gym.PARENT_DIR == tmp_path
    assert (nemo_gym.CACHE_DIR, nemo_gym.RESULTS_DIR) == (tmp_path / "cache", tmp_path / "results")


def test_the_port_tool_ports_the_environments_an_environment_imports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`resources_servers.<other>` imports: the other environment is ported beside the target
    and named (transitively, each once); a missing one, or a missing source, is one line and
    exit 2, never a traceback."""
    from gym_metrics.nemo_gym.port import main

    tree = tmp_path / "src" / "resources_servers"
    for name, body in {
        "top": "from resources_servers.middle.app import helper\nfrom nemo_gym.base_resources_server import X\n",
        "middle": "from resources_servers.leaf import util\nimport resources_servers.top\nhelper = 1\n",
        "leaf": "from nemo_gym import reward_profile\n",
        "unused": "from nemo_gym import x\n",
    }.items():
        (tree / name).mkdir(parents=True)
        (tree / name / "app.py").write_text(body)
    target = tmp_path / "dst" / "resources_servers"
    assert main([str(tree / "top"), str(target / "top")]) == 0
    out = capsys.readouterr().out
    assert "ported top: 1 file(s)" in out and "ported middle (imported by top)" in out and "ported leaf (imported by middle)" in out
    assert sorted(p.name for p in target.iterdir()) == ["leaf", "middle", "top"]
    assert (target / "leaf" / "app.py").read_text() == "from gym_metrics.nemo_gym import reward_profile\n"

    (tree / "leaf" / "app.py").unlink()
    (tree / "leaf").rmdir()
    assert main([str(tree / "top"), str(tmp_path / "dst2" / "top")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "middle imports resources_servers.leaf" in err and "Traceback" not in err
    assert main([str(tmp_path / "nowhere"), str(tmp_path / "dst3")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'nowhere'} is not a folder\n"


def test_the_port_tool_follows_an_agents_imports_into_the_tree_and_copies_nothing_when_one_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An agent importing an environment's code (image_tools_agent: `resources_servers.image_tools`)
    or another agent's was looked for beside the agent, under responses_api_agents/ (exit 2), a
    half-done copy left behind. Both kinds are found in the tree, and a missing one stops the
    port before anything is copied."""
    from gym_metrics.nemo_gym.port import main

    src = tmp_path / "src"
    for folder, body in {
        "responses_api_agents/tools_agent": "from resources_servers.tools.app import helper\nfrom responses_api_agents.base_agent.app import Base\n",
        "responses_api_agents/base_agent": "from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent\nBase = 1\n",
        "resources_servers/tools": "from nemo_gym import reward_profile\nhelper = 1\n",
    }.items():
        (src / folder).mkdir(parents=True)
        (src / folder / "app.py").write_text(body)
    dst = tmp_path / "dst"
    assert main([str(src / "responses_api_agents/tools_agent"), str(dst / "responses_api_agents/tools_agent")]) == 0
    out = capsys.readouterr().out
    assert "ported base_agent (imported by tools_agent)" in out and "ported tools (imported by tools_agent)" in out
    assert (dst / "resources_servers/tools/app.py").read_text().startswith("from gym_metrics.nemo_gym import reward_profile")
    assert (dst / "responses_api_agents/base_agent/app.py").is_file()

    (src / "resources_servers/tools/app.py").unlink()
    (src / "resources_servers/tools").rmdir()
    assert main([str(src / "responses_api_agents/tools_agent"), str(tmp_path / "dst2/responses_api_agents/tools_agent")]) == 2
    assert "tools_agent imports resources_servers.tools" in capsys.readouterr().err and not (tmp_path / "dst2").exists()


def test_the_porting_rule_keeps_the_name_nemo_gym_bound() -> None:
    """`import nemo_gym  # noqa: E402` (harness_agent) and `import nemo_gym.prompt` bound the name
    `nemo_gym`; their rewrites bound only `gym_metrics`, and `nemo_gym.` after them was a NameError."""
    assert rewrite_imports("import nemo_gym  # noqa: E402\n") == "import gym_metrics.nemo_gym as nemo_gym  # noqa: E402\n"
    assert rewrite_imports("import nemo_gym.prompt\n") == "import gym_metrics.nemo_gym.prompt; import gym_metrics.nemo_gym as nemo_gym\n"
    assert rewrite_imports("import nemo_gym.prompt as prompt\n") == "import gym_metrics.nemo_gym.prompt as prompt\n"
    namespace: dict[str, object] = {}
    exec(rewrite_imports("import nemo_gym.prompt\nfound = nemo_gym.prompt\n"), namespace)
    assert namespace["found"].__name__ == "gym_metrics.nemo_gym.prompt"  # type: ignore[attr-defined]


def test_the_port_tool_takes_the_benchmarks_and_servers_an_environment_imports_or_names_by_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An environment's tests import its benchmark's `prepare` module and an environment server
    (`from benchmarks.<name>...`, `from environment_servers.<name>...`); its fixture reads the
    benchmark's config by a path, whose YAML names a prompt of another benchmark. All of them
    come along; a path to a folder the tree does not have is skipped (it may be prose)."""
    from gym_metrics.nemo_gym.port import main

    src = tmp_path / "src"
    files = {
        "resources_servers/judge/app.py": 'CONFIG = "benchmarks/judge_bench/config.yaml"\nNOTE = "see benchmarks/absent/README"\n',
        "resources_servers/judge/tests/test_app.py": "from benchmarks.judge_prep.prepare import rows\nfrom environment_servers.turns.app import Turns\n",
        "benchmarks/judge_bench/config.yaml": "judge:\n  resources_servers:\n    judge:\n      prompt_fpath: ../../benchmarks/shared_prompts/judge.txt\n",
        "benchmarks/shared_prompts/judge.txt": "Is {a} {b}?\n",
        "benchmarks/judge_prep/prepare.py": "from nemo_gym.global_config import TASK_INDEX_KEY_NAME\nrows = []\n",
        "environment_servers/turns/app.py": "Turns = 1\n",
    }
    for name, body in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(body)
    dst = tmp_path / "dst"
    assert main([str(src / "resources_servers/judge"), str(dst / "resources_servers/judge")]) == 0
    out = capsys.readouterr().out
    for name in ("judge_bench", "judge_prep", "shared_prompts", "turns"):
        assert f"ported {name} (imported by" in out
    assert (dst / "benchmarks/shared_prompts/judge.txt").read_text() == "Is {a} {b}?\n"
    assert (dst / "benchmarks/judge_prep/prepare.py").read_text().startswith("from gym_metrics.nemo_gym.global_config import")
    assert not (dst / "benchmarks/absent").exists()


def test_the_port_tool_names_the_imports_this_python_cannot_find(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ported environment importing NeMo Gym's own dependencies (ray, datasets) or its
    requirements.txt's fails at its first import: the tool says which, with the pip line (an
    import name mapped to its package), the standard library, installed packages, the tree's
    packages and the environment's own modules left out."""
    from gym_metrics.nemo_gym.port import main

    env = tmp_path / "src/resources_servers/needs"
    (env / "helpers").mkdir(parents=True)
    (env / "helpers/__init__.py").write_text("")
    (env / "app.py").write_text(
        "import os, json\nimport yaml\nfrom helpers import x\nfrom . import local\nimport gm_absent_pkg.sub\n"
        "from resources_servers.other import y\ntry:\n    import sklearn\nexcept ImportError:\n    pass\n"
    )
    (env / "local.py").write_text("from nemo_gym.prompt import load\n")
    (tmp_path / "src/resources_servers/other").mkdir()
    (tmp_path / "src/resources_servers/other/app.py").write_text("import gm_absent_two\n")
    assert main([str(env), str(tmp_path / "dst/resources_servers/needs")]) == 0
    note = capsys.readouterr().out.strip().splitlines()[-1]
    expected = ["gm_absent_pkg", "gm_absent_two"] + ([] if importlib.util.find_spec("sklearn") else ["sklearn"])
    assert note.startswith(f"note: imported but not installed here: {', '.join(sorted(expected))} ")
    assert note.endswith("pip install " + " ".join("scikit-learn" if n == "sklearn" else n for n in sorted(expected)))
