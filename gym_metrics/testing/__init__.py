"""What environment authors and our own tests reuse: a real server for an environment, a
scripted OpenAI-compatible chat server standing in for an LLM judge, and a scripted
OpenAI-compatible policy (chat completions and responses) standing in for the model a target
generates with (so no test needs a model or the network).

A pytest fixture serving your environment, with pytest-asyncio:

    @pytest.fixture
    async def server():
        async with serve_environment(MyEnv()) as running:
            yield running  # running.address is "127.0.0.1:<port>"

Serving a row scorer as an environment is `gym_metrics.environments.ScorerEnvironment`.
"""

from __future__ import annotations

from gym_metrics._util.deprecated import old_names
from gym_metrics.testing._judge import (
    LoopbackServer,
    Recorded,
    Reply,
    ScriptedChatServer,
    ScriptedJudge,
    Stall,
    completion,
    keyed_answers,
    request_text,
    response_object,
    text_key,
)
from gym_metrics.testing._policy import PolicyAnswer, ScriptedPolicyServer, prompt_of, step_of
from gym_metrics.testing._replay import replayed_script
from gym_metrics.testing._serve import serve_environment
from gym_metrics.testing._nemo_check import CheckError, CheckReport, check_environment

__all__ = [
    "CheckError",
    "CheckReport",
    "LoopbackServer",
    "PolicyAnswer",
    "Recorded",
    "Reply",
    "ScriptedChatServer",
    "ScriptedJudge",
    "ScriptedPolicyServer",
    "Stall",
    "check_environment",
    "completion",
    "keyed_answers",
    "prompt_of",
    "replayed_script",
    "request_text",
    "response_object",
    "serve_environment",
    "step_of",
    "text_key",
]


__getattr__ = old_names(__name__)
