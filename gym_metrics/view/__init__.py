"""The rollout viewer (`gym-metrics view`): a local web app over rollout files, metrics files and
a collect in progress: runs and agents, tasks with pass rates, filtered and searched rollout
lists, one rollout whole (conversation, tool calls, model calls, verify fields, health), and two
runs side by side (docs/viewer.md)."""

from gym_metrics.view._app import ViewerApp
from gym_metrics.view._index import RunIndex
from gym_metrics.view._runs import Run, find_runs
from gym_metrics.view._serve import Viewer, make_app, serve

__all__ = ["Run", "RunIndex", "Viewer", "ViewerApp", "find_runs", "make_app", "serve"]
