"""What environment authors and our own tests reuse: a real server for an environment, and a
scripted OpenAI-compatible chat server standing in for an LLM judge (so no test needs a model
or the network).

A pytest fixture serving your environment, with pytest-asyncio:

    @pytest.fixture
    async def server():
        async with serve_environment(MyEnv()) as running:
            yield running  # running.address is "127.0.0.1:<port>"

Serving a row scorer as an environment is `gym_metrics.scorers.ScorerEnvironment`, also
exported here.
"""

from __future__ import annotations

from gym_metrics.scorers import ScorerEnvironment
from gym_metrics.testing._judge import Recorded, Reply, ScriptedChatServer, ScriptedJudge, Stall, completion
from gym_metrics.testing._serve import serve_environment

__all__ = [
    "Recorded",
    "Reply",
    "ScorerEnvironment",
    "ScriptedChatServer",
    "ScriptedJudge",
    "Stall",
    "completion",
    "serve_environment",
]
