"""The server face of the transport: start a ResourcesService in process (`start_server`) or
run one as a process until SIGTERM (`serve`); the bootstrap the job server shares."""

from gym_metrics._transport.server._server import SERVICE_NAME, RunningServer, ServerConfig, load_env, start_server
from gym_metrics._transport.server._serving import leave_stuck_threads, serve

__all__ = ["SERVICE_NAME", "RunningServer", "ServerConfig", "leave_stuck_threads", "load_env", "serve", "start_server"]
