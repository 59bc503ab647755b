"""llm_judge: rollouts scored by an LLM-judge row metric (see README.md)."""

from gym_metrics_servers.llm_judge.app import (
    JudgeSettings,
    LlmJudgeServer,
    LlmJudgeVerifyRequest,
    LlmJudgeVerifyResponse,
)

__all__ = ["JudgeSettings", "LlmJudgeServer", "LlmJudgeVerifyRequest", "LlmJudgeVerifyResponse"]
