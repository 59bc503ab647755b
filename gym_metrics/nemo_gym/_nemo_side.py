"""NeMo Gym's side of `gym-metrics check-env`, run by the Python of a venv where nemo-gym is
installed (it imports nemo_gym, omegaconf and fastapi, and nothing of gym-metrics):

    NEMO_PYTHON _nemo_side.py --root ROOT --env ENV --rows indexed.jsonl --out nemo.json [--config NAME]
        [--episodes --policy-port PORT [--observe CAPTURE_DIR]] [--server NAME=http://HOST:PORT ...]

The server is built from the environment's config as NeMo Gym's launcher builds it (composed by
NeMo Gym's parser, each `--server` a model server at that address; the
instance whose block has `resources_servers`, its first server block resolved, the class its
`app.py` runs with `run_webserver()`, host and port filled in), and its FastAPI app gets the
exception handling `run_webserver` adds. Each row is POSTed to `/verify` in a session of its own
(a row that carries a reward without the fields only verify's answer declares, as gym-metrics'
port reads it)
(as each agent run is; a refused row is recorded as `_nemo_refused`: its status, with
`_nemo_detail`), then the answers the collection keeps (no `_ng_failure_class`) to
`/aggregate_metrics`, stripped as the collection strips them. Written: {"responses": [...],
"metrics": [one entry per agent, shaped as `_aggregate_metrics.json`]}.

With `--episodes` each row is a task (its `response`, the fields only verify's answer declares
and its request's null fields, which a dumped request holds and /run refuses, left out: written
back as "tasks") run whole by the agent the config names for it
(`agent_ref.name`: simple_agent, tool_simulation_agent, ...; through the config's environment
server in front of it when that is not a relay: `single_agent_turn_legacy`, with NeMo Gym's
model server before the policy, which takes the rollout's path prefix off) against the policy listening on
127.0.0.1:PORT, every server under uvicorn as NeMo Gym serves it (lifespan on), each row's
`POST /run` in file order, one at a time, no cookies shared; the kept answers go to each agent's
`/aggregate_metrics`, as NeMo Gym's collection posts them (simple_agent forwards them to its
resources server; an agent of its own code may aggregate them itself).

With `--observe DIR` too, the run is observed as NeMo Gym's collection observes it
(`observability_enabled`, the capture in DIR): the policy is reached through NeMo Gym's own
openai_model server (its model-call capture middleware in front of it), and each answer gets
what the collection adds: the captured calls merged in (`ng_model_call_capture`, the agent's
observations joined to them), `ng_trajectory` projected, `ng_perf`.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import importlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

_STRIPPED = ("response", "responses_create_params", "ng_agent_observations", "ng_model_call_capture", "ng_trajectory")
_KEYS = ("_ng_task_index", "_ng_rollout_index", "agent_ref", "task_source", "skills_ref", "_ng_attempt_index", "_ng_rollout_id")
"""What NeMo Gym's collection copies from a row onto its result."""


def config_file(root: Path, env: str, name: str | None) -> Path:
    """`name` under the env's configs/ (a path with a `/`: under `root`, a benchmark's config),
    else `<env>.yaml`, else the first by name."""
    folder = root / "resources_servers" / env / "configs"
    if name and "/" in name:
        return root / name
    if name:
        return folder / (name if name.endswith(".yaml") else f"{name}.yaml")
    own = folder / f"{env}.yaml"
    return own if own.exists() else sorted(folder.glob("*.yaml"))[0]


def server_class_name(app: Path) -> str:
    """The class `app.py` runs: `<Class>.run_webserver()`."""
    for node in ast.walk(ast.parse(app.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "run_webserver":
            if isinstance(node.func.value, ast.Name):
                return node.func.value.id
    raise SystemExit(f"{app}: no <Class>.run_webserver() call")


def build_server(root: Path, glob: Any, client: Any = None) -> tuple[Any, str]:
    """The resources server of the config `glob` (read_config's) and its instance's name."""
    from omegaconf import OmegaConf

    from nemo_gym.config_types import BaseServerConfig  # type: ignore[import-not-found]  # (the NeMo Gym venv's)
    from nemo_gym.server_utils import ServerClient  # type: ignore[import-not-found]

    root = root.resolve()
    instance = instance_of(glob)
    impl = next(iter(glob[instance]["resources_servers"]))
    os.chdir(root / "resources_servers" / impl)  # NeMo Gym's launcher: `cd` to the server's folder, then `python app.py`
    block: Any = OmegaConf.to_container(glob[instance]["resources_servers"][impl], resolve=True)
    for folder in (root, root / "resources_servers" / impl):  # the tree, and the env's own
        sys.path.insert(0, str(folder))  # folder (`python app.py` imports its sibling files bare)
    module = importlib.import_module(f"resources_servers.{impl}.{Path(block['entrypoint']).stem}")
    cls = getattr(module, server_class_name(root / "resources_servers" / impl / block["entrypoint"]))
    config_model = cls.model_fields["config"].annotation.model_validate(block | {"name": instance, "host": "127.0.0.1", "port": 0})
    if client is None:
        client = ServerClient(head_server_config=BaseServerConfig(host="127.0.0.1", port=0), global_config_dict=glob)
    return cls(config=config_model, server_client=client), instance


def finished_app(server: Any) -> Any:
    """`setup_webserver()` with what `run_webserver` adds: exception handling and the validation handler."""
    from fastapi.exceptions import RequestValidationError

    from nemo_gym import server_utils  # type: ignore[import-not-found]

    app = server.setup_webserver()
    server.setup_exception_middleware(app)
    if hasattr(server, "setup_cancellation_middleware"):
        server.setup_cancellation_middleware(app)
    app.exception_handler(RequestValidationError)(server_utils._validation_exception_handler)
    return app


def read_config(config: Path, servers: dict[str, str] | None = None) -> Any:
    """The config composed by NeMo Gym's own parser (its `config_paths` loaded and merged, its
    `_inherit_from` and other directives applied; no command line, no validation of a run's
    servers), each block resolved where it is used: a block's interpolation that cannot resolve
    (another agent's API key) fails only what uses it. Each of `servers` (name -> http://host:port)
    gets that host and port in its block (a block made when the config has none), where NeMo
    Gym's ServerClient finds a server."""
    from urllib.parse import urlsplit

    from omegaconf import OmegaConf, open_dict

    from nemo_gym import global_config
    from nemo_gym.global_config import GlobalConfigDictParser, GlobalConfigDictParserConfig  # type: ignore[import-not-found]

    parser = GlobalConfigDictParser()
    initial = OmegaConf.merge(GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT, {"config_paths": [str(config)]})
    paths, extras = parser.load_extra_config_paths([str(config)])
    glob: Any = OmegaConf.merge(*extras, initial)
    with open_dict(glob):
        glob.config_paths = paths
        parser._recursively_swap_keys(glob)
        for name, url in (servers or {}).items():  # its block's fields kept, as gym-metrics' side keeps them
            where = urlsplit(url)
            address = {"host": where.hostname, "port": where.port}
            block: Any = glob.get(name)
            inner: Any = block[next(iter(block))] if hasattr(block, "keys") and len(block) == 1 else None
            if hasattr(inner, "keys") and len(inner) == 1 and hasattr(inner[next(iter(inner))], "keys"):
                inner[next(iter(inner))].update(address)
            else:
                glob[name] = {"responses_api_models": {"check_env_server": address}}
    global_config._GLOBAL_CONFIG_DICT = glob
    return glob


def instance_of(glob: Any) -> str:
    """The config's resources server instance: the block holding `resources_servers`."""
    return next(str(k) for k, v in glob.items() if hasattr(v, "keys") and "resources_servers" in v)


def build_app(root: Path, env: str, config: Path, servers: dict[str, str]) -> Any:
    """The app, its NeMo Gym aiohttp client made at its start-up in the test client's loop (it
    would otherwise read the global config from the command line), and answer_only_fields."""
    from nemo_gym import server_utils

    os.chdir(root)  # relative config_paths start there, as from a checkout's root
    server, _ = build_server(root, read_config(config, servers))
    app = finished_app(server)

    async def open_client() -> None:
        server_utils._GLOBAL_AIOHTTP_CLIENT = None
        server_utils.set_global_aiohttp_client(server_utils.GlobalAIOHTTPAsyncClientConfig())

    async def close_client() -> None:
        client, server_utils._GLOBAL_AIOHTTP_CLIENT = server_utils._GLOBAL_AIOHTTP_CLIENT, None
        if client is not None:
            await client.close()

    app.router.on_startup.insert(0, open_client)
    app.router.on_shutdown.append(close_client)
    return app, answer_only_fields(server)


def answer_only_fields(server: Any) -> set[str]:
    """The fields verify's answer declares and its request does not (`reward`, a grade it
    extracts, ...): a row that already carries them is a scored rollout, verified again as the
    request it was (NeMo Gym's `Response(**body.model_dump(), reward=...)` would see them twice)."""
    import typing

    hints = typing.get_type_hints(server.verify)
    request = next((h for name, h in hints.items() if name not in ("return", "request")), None)
    answer = hints.get("return")
    declared = set(getattr(answer, "model_fields", {})) | {"reward", "mask_sample", "failure_kind", "failure_reason"}
    return declared - set(getattr(request, "model_fields", {}))


def strip(answer: dict[str, Any]) -> dict[str, Any]:
    """What the collection sends to /aggregate_metrics for one kept row."""
    entry = {k: v for k, v in answer.items() if k not in _STRIPPED}
    response = answer.get("response") or {}
    kept = {k: response[k] for k in ("usage", "incomplete_details") if response.get(k) is not None}
    if kept:
        entry["response"] = kept
    return entry


def run_episodes(
    root: Path, config: Path, rows: list[dict[str, Any]], policy_port: int, servers: dict[str, str], observe: Path | None = None
) -> dict[str, Any]:
    """Each task row's `POST /run` answer from the agent the config names for it (module
    docstring), and the metrics of the kept answers."""
    os.chdir(root)  # relative config_paths start there, as from a checkout's root
    return asyncio.run(_episodes(root, read_config(config, servers), rows, policy_port, observe))


def _model_server(glob: Any, name: str, policy_port: int, sock: Any, client: Any) -> Any:
    """NeMo Gym's openai_model server named `name`, in front of the policy (its capture on)."""
    module = importlib.import_module("responses_api_models.openai_model.app")
    from nemo_gym.base_responses_api_model import SimpleResponsesAPIModel  # type: ignore[import-not-found]

    cls: Any = next(c for c in vars(module).values() if isinstance(c, type) and c.__module__ == module.__name__ and issubclass(c, SimpleResponsesAPIModel))
    fields = {"name": name, "entrypoint": "app.py", "host": "127.0.0.1", "port": sock.getsockname()[1], "openai_model": "scripted",
              "openai_base_url": f"http://127.0.0.1:{policy_port}/v1", "openai_api_key": "not-a-key"}  # fmt: skip
    glob[name] = {"responses_api_models": {"openai_model": fields}}
    return finished_app(cls(config=cls.model_fields["config"].annotation.model_validate(fields), server_client=client))


def _fronting_servers(glob: Any, agents: dict[str, Any]) -> dict[str, str]:
    """Agent name -> the environment server in front of it that is not a relay (`legacy_agent`
    relays `/run` unchanged, so its agent is posted to directly): `single_agent_turn_legacy`,
    which runs NeMo Gym's session protocol (the agent's `/v1/agent_sessions`)."""
    fronts = {}
    for name, block in glob.items():
        inner: Any = block.get("environment_servers") if hasattr(block, "keys") else None
        if hasattr(inner, "keys") and len(inner) == 1 and next(iter(inner)) != "legacy_agent":
            agent = inner[next(iter(inner))].get("agent_server", {}).get("name")
            if agent in agents:
                fronts[str(agent)] = str(name)
    return fronts


def _environment_server(glob: Any, name: str, client: Any) -> Any:
    """The app of the environment server `name`, its class the one its `app.py` runs."""
    from omegaconf import OmegaConf

    impl = next(iter(glob[name]["environment_servers"]))
    fields: Any = OmegaConf.to_container(glob[name]["environment_servers"][impl], resolve=True)
    module = importlib.import_module(f"environment_servers.{impl}.{Path(fields['entrypoint']).stem}")
    cls: Any = getattr(module, server_class_name(Path(module.__file__ or "")))
    return finished_app(cls(config=cls.model_fields["config"].annotation.model_validate(fields | {"name": name}), server_client=client))


def _observed(task: dict[str, Any], result: dict[str, Any], capture_dir: Path, latency_ms: float) -> None:
    """What NeMo Gym's collection adds to an observed rollout's answer (module docstring)."""
    from nemo_gym import rollout_collection
    from nemo_gym.base_responses_api_model import merge_model_call_capture_into_record

    merge_model_call_capture_into_record(result, [capture_dir], include_payloads=True)
    if any(k in result for k in ("ng_model_call_capture", "ng_agent_observations", "ng_trajectory")):
        rollout_collection._attach_trajectory_record(task, result)
    rollout_collection._attach_ng_perf(result, observability_enabled=True, rollout_latency_ms=latency_ms)


async def _episodes(root: Path, glob: dict[str, Any], rows: list[dict[str, Any]], policy_port: int, observe: Path | None = None) -> dict[str, Any]:
    import socket

    from omegaconf import OmegaConf

    from nemo_gym import global_config, server_utils
    from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent  # type: ignore[import-not-found]
    from nemo_gym.config_types import BaseServerConfig
    from nemo_gym.server_utils import ServerClient

    instance = instance_of(glob)
    agents: dict[str, Any] = {}  # name -> its block's fields (an OmegaConf node)
    for name, block in glob.items():
        inner: Any = block.get("responses_api_agents") if hasattr(block, "keys") else None
        if hasattr(inner, "keys") and len(inner) == 1 and inner[next(iter(inner))].get("resources_server", {}).get("name") == instance:
            agents[str(name)] = inner
    models = sorted({str(inner[next(iter(inner))]["model_server"]["name"]) for inner in agents.values()})
    fronts = _fronting_servers(glob, agents)
    modelled = observe is not None or bool(fronts)  # a session's model calls carry the rollout's path prefix, which a model server takes off
    sockets = {name: socket.create_server(("127.0.0.1", 0)) for name in [instance, *agents, *fronts.values(), *(models if modelled else [])]}
    for name, sock in sockets.items():
        if name in models:
            continue
        node = glob[name]["resources_servers" if name == instance else "environment_servers" if name in fronts.values() else "responses_api_agents"]
        node[next(iter(node))].update({"host": "127.0.0.1", "port": sock.getsockname()[1]})
    for model in models:  # every model server an agent names: the scripted policy
        glob[model] = {"responses_api_models": {"scripted_policy": {"host": "127.0.0.1", "port": policy_port}}}
    if observe is not None:
        glob["observability_enabled"], glob["model_call_capture_dir"] = True, str(observe)
    global_config._GLOBAL_CONFIG_DICT = glob
    client = ServerClient(head_server_config=BaseServerConfig(host="127.0.0.1", port=0), global_config_dict=glob)
    server, _ = build_server(root, glob, client)
    apps = {instance: finished_app(server)}
    if modelled:  # each model server: NeMo Gym's own (capturing when observed), in front of the policy
        apps.update({model: _model_server(glob, model, policy_port, sockets[model], client) for model in models})
    for name, inner in agents.items():
        impl = next(iter(inner))
        module = importlib.import_module(f"responses_api_agents.{impl}.app")
        cls: Any = next(c for c in vars(module).values() if isinstance(c, type) and c.__module__ == module.__name__ and issubclass(c, SimpleResponsesAPIAgent))
        fields: Any = OmegaConf.to_container(inner[impl], resolve=True)
        apps[name] = finished_app(cls(config=cls.model_fields["config"].annotation.model_validate(fields | {"name": name}), server_client=client))
    for name in fronts.values():
        apps[name] = _environment_server(glob, name, client)
    answer_only = answer_only_fields(server)
    responses: list[dict[str, Any]] = []
    tasks: list[dict[str, Any]] = []
    by_agent: dict[str, list[dict[str, Any]]] = {}
    async with served(apps, sockets):
        for row in rows:
            task = {k: v for k, v in row.items() if k != "response" and not ("reward" in row and k in answer_only)}
            if isinstance(task.get("responses_create_params"), dict):  # a rollout's request as NeMo Gym dumps it:
                task["responses_create_params"] = {k: v for k, v in task["responses_create_params"].items() if v is not None}  # its unset fields null
            tasks.append(task)
            started = time.perf_counter()
            agent = task["agent_ref"]["name"]
            answer = await client.post(server_name=fronts.get(agent, agent), url_path="/run", json=task)
            keys = {k: task[k] for k in _KEYS if k in task}
            if answer.status != 200:
                responses.append({"_nemo_refused": answer.status, "_nemo_detail": (await answer.text())[:2000], **keys})
                continue
            result = await answer.json() | keys
            if observe is not None:
                _observed(task, result, observe, (time.perf_counter() - started) * 1000)
            responses.append(result)
            if result.get("_ng_failure_class") is None:
                by_agent.setdefault(task["agent_ref"]["name"], []).append(json.loads(json.dumps(strip(result))))
        metrics = []
        for agent, kept in sorted(by_agent.items()):
            answer = await client.post(server_name=fronts.get(agent, agent), url_path="/aggregate_metrics", json={"verify_responses": kept})
            if answer.status != 200:
                raise SystemExit(f"NeMo Gym's /aggregate_metrics answered {answer.status}: {(await answer.text())[:500]}")
            dumped = await answer.json()
            metrics.append({"agent_ref": {"name": agent}, **{k: dumped.get(k) for k in _METRIC_PARTS}})
    return {"responses": responses, "metrics": metrics, "tasks": tasks}


@contextlib.asynccontextmanager
async def served(apps: dict[str, Any], sockets: dict[str, Any], start_timeout_s: float = 60) -> AsyncIterator[None]:
    """Each app under uvicorn on its bound socket, as NeMo Gym serves it (lifespan on), and NeMo
    Gym's global aiohttp client (no cookies shared) while the block runs; all stopped after it."""
    import uvicorn

    from nemo_gym import server_utils

    servers = []
    for name, app in apps.items():
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1))
        servers.append((server, asyncio.create_task(server.serve(sockets=[sockets[name]]))))
    http = server_utils.set_global_aiohttp_client(server_utils.GlobalAIOHTTPAsyncClientConfig())

    async def started() -> None:
        while not all(server.started for server, _ in servers):
            await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(started(), start_timeout_s)
        yield
    finally:
        await http.close()
        server_utils._GLOBAL_AIOHTTP_CLIENT = None
        for server, _ in servers:
            server.should_exit = True
        await asyncio.wait_for(asyncio.gather(*(task for _, task in servers), return_exceptions=True), 30)


_METRIC_PARTS = ("agent_metrics", "key_metrics", "group_level_metrics", "repeat_level_metrics")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--env", required=True)
    parser.add_argument("--rows", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--config")
    parser.add_argument("--episodes", action="store_true")
    parser.add_argument("--policy-port", type=int)
    parser.add_argument("--server", action="append", default=[], metavar="NAME=http://HOST:PORT")
    parser.add_argument("--observe", type=Path, metavar="CAPTURE_DIR")
    args = parser.parse_args()
    servers = dict(item.split("=", 1) for item in args.server)
    args.root, args.rows, args.out = args.root.resolve(), args.rows.resolve(), args.out.resolve()  # (the server runs in its own folder)
    if args.episodes:
        rows = [json.loads(line) for line in args.rows.read_text(encoding="utf-8").splitlines() if line.strip()]
        observe = args.observe.resolve() if args.observe else None
        done = run_episodes(args.root, config_file(args.root, args.env, args.config), rows, args.policy_port, servers, observe)
        args.out.write_text(json.dumps(done), encoding="utf-8")
        sys.stdout.flush()
        os._exit(0)  # not multiprocessing's exit join: an episode that failed leaves its environment's worker process (math_with_code's) blocked
    from fastapi.testclient import TestClient

    rows = [json.loads(line) for line in args.rows.read_text(encoding="utf-8").splitlines() if line.strip()]
    responses: list[dict[str, Any]] = []
    by_agent: dict[str, list[dict[str, Any]]] = {}
    app, answer_only = build_app(args.root, args.env, config_file(args.root, args.env, args.config), servers)
    with TestClient(app, raise_server_exceptions=False) as client:
        for row in rows:
            client.cookies.clear()  # a session per rollout
            if "reward" in row:
                row = {k: v for k, v in row.items() if k not in answer_only}
            answer = client.post("/verify", json=row)
            keys = {k: row[k] for k in _KEYS if k in row}
            if answer.status_code != 200:  # refused (a row that does not fit): no rollout to keep
                responses.append({"_nemo_refused": answer.status_code, "_nemo_detail": answer.text[:2000], **keys})
                continue
            result = answer.json() | keys
            responses.append(result)
            if result.get("_ng_failure_class") is None:
                by_agent.setdefault(row["agent_ref"]["name"], []).append(json.loads(json.dumps(strip(result))))
        metrics = []
        for agent, kept in sorted(by_agent.items()):
            answer = client.post("/aggregate_metrics", json={"verify_responses": kept})
            if answer.status_code != 200:
                raise SystemExit(f"NeMo Gym's /aggregate_metrics answered {answer.status_code}: {answer.text[:500]}")
            dumped = answer.json()
            metrics.append({"agent_ref": {"name": agent}, **{k: dumped.get(k) for k in _METRIC_PARTS}})
    args.out.write_text(json.dumps({"responses": responses, "metrics": metrics}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
