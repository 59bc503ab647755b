"""OpenEnv environments on gym-metrics (`gym-metrics[openenv]`): an OpenEnv `Environment` class
served unchanged (`gym-metrics serve module:EnvClass`, or `openenv_server(EnvClass)`), driven
by collect as an environment that answers each turn: reset when the session opens, a step per
action of each model turn, the observation as the next user message, the rewards summed.

OpenEnv is imported only by the environment's own module and, for MCP environments, when a
session opens; nothing here imports it at load time."""

from gym_metrics.ecosystems.openenv._kinds import INSTALL_HINT, action_type, is_mcp, is_openenv_environment
from gym_metrics.ecosystems.openenv._server import ENDED, ROW_FIELD, OpenEnvServer, adapt, openenv_server
from gym_metrics.ecosystems.openenv._turns import STEP_TOOL, client_view, moves_of, observation_text

__all__ = [
    "ENDED",
    "INSTALL_HINT",
    "ROW_FIELD",
    "STEP_TOOL",
    "OpenEnvServer",
    "action_type",
    "adapt",
    "client_view",
    "is_mcp",
    "is_openenv_environment",
    "moves_of",
    "observation_text",
    "openenv_server",
]
