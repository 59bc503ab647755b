"""Record NeMo Gym 0.7.0's training rollouts: its simple_agent running episodes through its own
vLLM model server (`responses_api_models/vllm_model`, `return_token_id_information: true`) in
front of gym-metrics' scripted vLLM-like chat policy, which returns exact token IDs and log-probs.
The answers carry the token fields NeMo Gym writes on each turn's last output item; they are the
reference tests/recording/test_nemo_training_sequence.py compares `collect --capture-tokens`
with, and the input NeMo RL's own code turns into training sequences
(scripts/make_nemo_rl_sequence_reference.py).

A tool for producing test data, run in the throwaway nemo-gym venv, as
scripts/make_nemo_agent_reference.py is (whose servers, rows and policy process it reuses):

    /tmp/ngvenv/bin/python scripts/make_nemo_token_reference.py --wheel /tmp/ng \
        --policy-python /work/main/.venv/bin/python          # write
    ... --check                                             # compare (exit 1 on a difference)

For ENV (example_session_state_mgmt, NeMo Gym's counter: multi-turn, two calls in one turn),
with its policy of tests/data/nemo_gym_agent: rows.jsonl (as that recording's), verify.jsonl (each
/run answer), in tests/data/nemo_gym_tokens/. The vllm_model server is its app under uvicorn on
127.0.0.1:0 like the others, its config: base_url the policy's /v1, model "scripted",
return_token_id_information and request_prompt_and_generation_token_ids true (token IDs inline,
as `collect --capture-tokens` asks them, not from a second `/tokenize` call), uses_reasoning_parser
false (the rest its defaults). Times and
the ids NeMo Gym draws from uuid4 (`resp_...`, `msg_...`, `fc_...` are the policy's) are replaced
by "<time>" / "<id>" so runs are identical.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from make_nemo_agent_reference import MODEL_SERVER, Episodes, Policy, bound_socket, rows_of, _last_user_text  # noqa: E402
from reference_file import write_or_check  # noqa: E402

ENV = "example_session_state_mgmt"
OUT = ROOT / "tests" / "data" / "nemo_gym_tokens" / ENV
POLICY = ROOT / "tests" / "data" / "nemo_gym_agent" / ENV / "policy.json"
_UUID = re.compile(r"[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class TokenEpisodes(Episodes):
    """The env's servers and simple_agent, with NeMo Gym's vllm_model between the agent and the policy."""

    def __init__(self, wheel: Path, name: str, policy_port: int) -> None:
        from responses_api_models.vllm_model.app import VLLMModel, VLLMModelConfig

        super().__init__(wheel, name, policy_port)
        self.sockets["model"] = bound_socket()
        block = {"host": "127.0.0.1", "port": self.sockets["model"].getsockname()[1], "entrypoint": "app.py",
                 "base_url": f"http://127.0.0.1:{policy_port}/v1", "api_key": "none", "model": "scripted",
                 "return_token_id_information": True, "request_prompt_and_generation_token_ids": True,
                 "uses_reasoning_parser": False}  # fmt: skip
        self.global_config[MODEL_SERVER] = {"responses_api_models": {"vllm_model": block}}
        self.model = VLLMModel(config=VLLMModelConfig.model_validate(block | {"name": MODEL_SERVER}), server_client=self.client)

    def apps(self) -> dict[str, Any]:
        from fastapi.exceptions import RequestValidationError

        from nemo_gym.server_utils import _validation_exception_handler

        out = super().apps()
        app = self.model.setup_webserver()
        self.model.setup_exception_middleware(app)
        app.exception_handler(RequestValidationError)(_validation_exception_handler)
        out["model"] = app
        return out


def scrubbed(value: Any) -> Any:
    """Times and uuid4-drawn ids replaced, so two runs write the same file."""
    if isinstance(value, dict):
        return {k: "<time>" if k in ("created_at", "created") and isinstance(v, (int, float)) else scrubbed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrubbed(v) for v in value]
    if isinstance(value, str):
        return _UUID.sub("<id>", value)
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", type=Path, required=True, help="the unzipped nemo-gym 0.7.0 wheel")
    parser.add_argument("--policy-python", required=True, help="a python with gym-metrics installed (the policy's process)")
    parser.add_argument("--check", action="store_true", help="compare with the committed files instead of writing them")
    args = parser.parse_args()
    import itertools
    import uuid

    from nemo_gym import server_utils

    counter = itertools.count(1)
    server_utils.uuid4 = lambda: uuid.UUID(int=next(counter))
    scripted = json.loads(POLICY.read_text(encoding="utf-8"))
    with Policy(args.policy_python, POLICY, False) as policy:
        episodes = TokenEpisodes(args.wheel, ENV, policy.port)
        rows = [r for r in rows_of(args.wheel, episodes.env) if _last_user_text(r["responses_create_params"].get("input")) in scripted]
        answers, _ = asyncio.run(episodes.run(rows, policy))
    lines = lambda items: "".join(json.dumps(i, sort_keys=True) + "\n" for i in items)  # noqa: E731
    code = write_or_check(OUT / "rows.jsonl", lines(rows), args.check)
    return code or write_or_check(OUT / "verify.jsonl", lines(scrubbed(a) for a in answers), args.check)


if __name__ == "__main__":
    sys.exit(main())
