"""NeMo Gym's side of `gym-metrics check-env`, run by the Python of a venv where nemo-gym is
installed (it imports nemo_gym, omegaconf and fastapi, and nothing of gym-metrics):

    NEMO_PYTHON _nemo_side.py --root ROOT --env ENV --rows indexed.jsonl --out nemo.json [--config NAME]

The server is built from the environment's config as NeMo Gym's launcher builds it (the YAML's
instance whose block has `resources_servers`, its first server block resolved, the class its
`app.py` runs with `run_webserver()`, host and port filled in), and its FastAPI app gets the
exception handling `run_webserver` adds. Each row is POSTed to `/verify` in a session of its own
(a row that carries a reward without the fields only verify's answer declares, as gym-metrics'
port reads it)
(as each agent run is; a refused row is recorded as `_nemo_refused`: its status, with
`_nemo_detail`), then the answers the collection keeps (no `_ng_failure_class`) to
`/aggregate_metrics`, stripped as the collection strips them. Written: {"responses": [...],
"metrics": [one entry per agent, shaped as `_aggregate_metrics.json`]}.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import sys
from pathlib import Path
from typing import Any

_STRIPPED = ("response", "responses_create_params", "ng_agent_observations", "ng_model_call_capture", "ng_trajectory")
_KEYS = ("_ng_task_index", "_ng_rollout_index", "agent_ref", "task_source", "skills_ref", "_ng_attempt_index", "_ng_rollout_id")
"""What NeMo Gym's collection copies from a row onto its result."""


def config_file(root: Path, env: str, name: str | None) -> Path:
    folder = root / "resources_servers" / env / "configs"
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


def build_app(root: Path, env: str, config: Path) -> Any:
    from fastapi.exceptions import RequestValidationError
    from omegaconf import OmegaConf  # type: ignore[import-not-found]

    from nemo_gym import server_utils  # type: ignore[import-not-found]  # (the NeMo Gym venv's)
    from nemo_gym.config_types import BaseServerConfig  # type: ignore[import-not-found]
    from nemo_gym.server_utils import ServerClient  # type: ignore[import-not-found]

    glob = OmegaConf.load(config)
    instance = next(k for k, v in glob.items() if hasattr(v, "keys") and "resources_servers" in v)
    impl, block = next(iter(glob[instance]["resources_servers"].items()))
    block = OmegaConf.to_container(block, resolve=True)
    for folder in (root.resolve(), (root / "resources_servers" / impl).resolve()):  # the tree, and the env's own
        sys.path.insert(0, str(folder))  # folder (`python app.py` imports its sibling files bare)
    module = importlib.import_module(f"resources_servers.{impl}.{Path(block['entrypoint']).stem}")
    cls = getattr(module, server_class_name(root / "resources_servers" / impl / block["entrypoint"]))
    config_model = cls.model_fields["config"].annotation.model_validate(block | {"name": instance, "host": "127.0.0.1", "port": 0})
    client = ServerClient(head_server_config=BaseServerConfig(host="127.0.0.1", port=0), global_config_dict=OmegaConf.create(glob))
    server = cls(config=config_model, server_client=client)
    app = server.setup_webserver()
    server.setup_exception_middleware(app)
    app.exception_handler(RequestValidationError)(server_utils._validation_exception_handler)
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--env", required=True)
    parser.add_argument("--rows", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--config")
    args = parser.parse_args()
    from fastapi.testclient import TestClient

    rows = [json.loads(line) for line in args.rows.read_text(encoding="utf-8").splitlines() if line.strip()]
    responses: list[dict[str, Any]] = []
    by_agent: dict[str, list[dict[str, Any]]] = {}
    app, answer_only = build_app(args.root, args.env, config_file(args.root, args.env, args.config))
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
            parts = ("agent_metrics", "key_metrics", "group_level_metrics", "repeat_level_metrics")
            metrics.append({"agent_ref": {"name": agent}, **{k: dumped.get(k) for k in parts}})
    args.out.write_text(json.dumps({"responses": responses, "metrics": metrics}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
