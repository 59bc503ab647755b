"""Record the training sequences NeMo RL's own code builds from NeMo Gym's training rollouts
(tests/data/nemo_gym_tokens/*/verify.jsonl, scripts/make_nemo_token_reference.py): its
`NemoGym._postprocess_nemo_gym_to_nemo_rl_result` (nemo_rl/environments/nemo_gym.py), which
turns each /run answer into the message log GRPO trains on. For
tests/recording/test_nemo_training_sequence.py, which checks `gym_metrics.recording.linearize`
against it.

A tool for producing test data. NeMo RL is not on PyPI (its `nemo-rl` there is an empty
placeholder), so it runs from a source checkout of github.com/NVIDIA-NeMo/RL on the path, in a
throwaway venv with what that module imports (torch CPU, ray, transformers below 5.12, which
nemo_rl.models.policy asserts, pillow, pyzmq, pynvml, uvicorn, fastapi):

    python3.11 -m venv /tmp/rlvenv && /tmp/rlvenv/bin/pip install torch==2.13.0 transformers==5.11.0 ray \
        pillow pyzmq pynvml uvicorn fastapi
    /tmp/rlvenv/bin/python scripts/make_nemo_rl_sequence_reference.py --nemo-rl /tmp/nemorl_src            # write
    ... --check                                                                                          # compare

Recorded with NeMo RL at commit 7ea279abfbeb698b092856d0dab61e7cf39bc909 (2026-08-22). The
method is called unbound, as NeMo RL's own tests call it, on a stand-in with an empty config and
no processor (text only); its tokenizer is used only to decode strings for logging, so a stand-in
that decodes nothing is given. Per answer, in order: each message of `message_log`, its role and
`token_ids`, and an assistant message's `generation_logprobs` (rounded to 6 places, as the policy
sent them). Written to tests/data/nemo_gym_tokens/<env>/nemo_rl_message_logs.jsonl.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

from reference_file import write_or_check  # scripts/

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "nemo_gym_tokens"


class NoDecoding:
    """The tokenizer stand-in: the method decodes prompt and generation strings for logging only."""

    def batch_decode(self, batches: list[list[int]]) -> list[str]:
        return ["" for _ in batches]


class StandIn:
    cfg: dict[str, Any] = {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nemo-rl", type=Path, required=True, help="a source checkout of NVIDIA-NeMo/RL (the folder holding nemo_rl/)")
    parser.add_argument("--check", action="store_true", help="compare with the committed files instead of writing them")
    args = parser.parse_args()
    sys.path.insert(0, str(args.nemo_rl))
    from nemo_rl.environments.nemo_gym import NemoGym

    code = 0
    for env in sorted(p for p in DATA.iterdir() if (p / "verify.jsonl").exists()):
        rows = [json.loads(line) for line in (env / "rows.jsonl").read_text().splitlines()]
        logs = []
        for row, line in zip(rows, (env / "verify.jsonl").read_text().splitlines()):
            method = NemoGym.__ray_metadata__.modified_class._postprocess_nemo_gym_to_nemo_rl_result  # the class under ray.remote
            result = method(StandIn(), row, copy.deepcopy(json.loads(line)), NoDecoding())
            logs.append([{"role": m["role"], "token_ids": m["token_ids"].tolist(),
                          **({"generation_logprobs": [round(x, 6) for x in m["generation_logprobs"].tolist()]} if "generation_logprobs" in m else {})}
                         for m in result["message_log"]])  # fmt: skip
        code |= write_or_check(env / "nemo_rl_message_logs.jsonl", "".join(json.dumps(log) + "\n" for log in logs), args.check)
    return code


if __name__ == "__main__":
    sys.exit(main())
