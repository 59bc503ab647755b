"""Record what NeMo Gym 0.7.0 answers to tool calls and verify on tests/nemo_gym/envs/routes_env
(a test environment in NeMo Gym's own form: a catch-all route, HTTPExceptions, a body that does
not fit, a bare str, an exception, `response_model=`, a verify annotated with the base class, a
lifespan whose state a route reads).

A tool for producing test data, run in a throwaway nemo-gym venv:

    /tmp/ngvenv/bin/python scripts/make_nemo_routes_reference.py             # write
    /tmp/ngvenv/bin/python scripts/make_nemo_routes_reference.py --check     # compare (exit 1 on a difference)

The app is built as NeMo Gym's `run_webserver` builds it (setup_webserver, then its exception
and cancellation middleware and its validation handler), and driven through Starlette's
TestClient (its cookie jar: one session per episode, as simple_agent's cookies; as a context
manager it runs the app's lifespan, as uvicorn does). Per episode:
POST /seed_session with the row, each call `POST /<name>` with the arguments as JSON (the body
text, decoded as simple_agent decodes it, and the status), then POST /verify with the row and a
response. Written to tests/data/nemo_gym_routes/episodes.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from reference_file import load_module, write_or_check  # scripts/

ROOT = Path(__file__).resolve().parents[1]
ENV = ROOT / "tests" / "nemo_gym" / "envs" / "routes_env"
OUT = ROOT / "tests" / "data" / "nemo_gym_routes" / "episodes.json"

RESPONSE = {
    "id": "resp_1", "created_at": 0, "model": "scripted", "object": "response", "parallel_tool_calls": True,
    "tool_choice": "auto", "tools": [],
    "output": [{"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "done", "annotations": []}]}],
}  # fmt: skip

EPISODES: list[dict[str, Any]] = [
    {"calls": [("sin", {"x": 0.5}), ("cos", {"x": 0.0}), ("tangent", {"x": 1.0}), ("sin", {"y": 1})]},
    {"calls": [("lookup", {"key": "a"}), ("lookup", {"key": "b"}), ("lookup", {}), ("greet", {})]},
    {"calls": [("explode", {}), ("small", {}), ("verify", {"reward": 5}), ("lifespan", {})]},
    {"calls": []},
]


def build_app() -> Any:
    from fastapi.exceptions import RequestValidationError

    from nemo_gym import server_utils
    from nemo_gym.server_utils import ServerClient

    module = load_module(ENV / "app.py", "routes_env_app")
    config = module.RoutesConfig(host="127.0.0.1", port=0, entrypoint="app.py", name="routes_env", domain="other")
    server = module.RoutesServer(config=config, server_client=ServerClient.model_construct())
    app = server.setup_webserver()
    server.setup_exception_middleware(app)
    server.setup_cancellation_middleware(app)
    app.exception_handler(RequestValidationError)(server_utils._validation_exception_handler)
    return app


def record() -> list[dict[str, Any]]:
    from fastapi.testclient import TestClient

    app = build_app()
    out = []
    for number, episode in enumerate(EPISODES):
        row = {"responses_create_params": {"input": f"episode {number}"}}
        with TestClient(app, raise_server_exceptions=False) as client:
            seeded = client.post("/seed_session", json=row)
            calls = []
            for name, arguments in episode["calls"]:
                answer = client.post(f"/{name}", json=arguments)
                calls.append({"name": name, "arguments": arguments, "status": answer.status_code, "output": answer.content.decode()})
            verified = client.post("/verify", json=row | {"response": RESPONSE})
        out.append({"row": row, "seed_status": seeded.status_code, "calls": calls, "verify_status": verified.status_code, "verify": verified.json()})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    episodes = record()
    text = json.dumps({"nemo_gym": "0.7.0", "response": RESPONSE, "episodes": episodes}, indent=1, ensure_ascii=False) + "\n"
    return write_or_check(OUT, text, args.check)


if __name__ == "__main__":
    sys.exit(main())
