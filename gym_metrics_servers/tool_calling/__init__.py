"""tool_calling: tool-call accuracy and the tool-calling template metric (see README.md)."""

from gym_metrics_servers.tool_calling.app import (
    SAMPLE_PATH,
    ToolCallingServer,
    ToolCallingVerifyRequest,
    ToolCallingVerifyResponse,
)

__all__ = ["SAMPLE_PATH", "ToolCallingServer", "ToolCallingVerifyRequest", "ToolCallingVerifyResponse"]
