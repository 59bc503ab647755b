"""Short-answer questions scored by normalised exact match, written as a NeMo Gym resources
server is (its imports point at gym_metrics.nemo_gym): a config class read from
configs/short_answer.yaml, a typed verify request, and NeMo Gym's pass@k / majority@k metrics
from its reward_profile helpers."""

import re
import string
from typing import Any, Optional

from gym_metrics.nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from gym_metrics.nemo_gym.reward_profile import compute_pass_majority_metrics, highest_k_metrics

_ANSWER = re.compile(r"(?:final answer|answer)\s*[:=]\s*(.+)", re.IGNORECASE)


class ShortAnswerConfig(BaseResourcesServerConfig):
    case_sensitive: bool = False
    strip_punctuation: bool = True


class ShortAnswerRequest(BaseVerifyRequest):
    expected_answer: str


class ShortAnswerResponse(BaseVerifyResponse):
    expected_answer: str
    extracted_answer: Optional[str]


def extract_answer(text: str) -> Optional[str]:
    """The text after the last "Answer:" line, else the last non-empty line; None when empty."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        found = _ANSWER.search(line)
        if found:
            return found.group(1).strip()
    return lines[-1] if lines else None


class ShortAnswerServer(SimpleResourcesServer):
    config: ShortAnswerConfig

    def normalise(self, text: str) -> str:
        if self.config.strip_punctuation:
            text = text.translate(str.maketrans("", "", string.punctuation))
        text = " ".join(text.split())
        return text if self.config.case_sensitive else text.lower()

    async def verify(self, body: ShortAnswerRequest) -> ShortAnswerResponse:
        extracted = extract_answer(body.response.output_text)
        correct = extracted is not None and self.normalise(extracted) == self.normalise(body.expected_answer)
        return ShortAnswerResponse(**body.model_dump(), reward=float(correct), extracted_answer=extracted)

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return compute_pass_majority_metrics(tasks, answer_key="extracted_answer")[0]

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        key = {"mean/reward": agent_metrics["mean/reward"]} if "mean/reward" in agent_metrics else {}
        key.update(highest_k_metrics(agent_metrics, "pass@{k}", score_names=["accuracy"]))
        key.update(highest_k_metrics(agent_metrics, "majority@{k}", score_names=["accuracy"]))
        return key
