"""Ray backend (the optional extra `gym-metrics[ray]`): environment servers as Ray actors, and
aggregation of a rollouts set as Ray tasks merged exactly, and collect's shards as Ray tasks.

Importing this package does not import Ray; the first call that needs it does, and says which
extra to install when Ray is missing. `import gym_metrics` never loads this package.
"""

from __future__ import annotations

from gym_metrics.ray._aggregate import aggregate_on_ray, ray_partials
from gym_metrics.ray._collect import collect_shards_on_ray
from gym_metrics.ray._replicas import RAY_EXTRA_HINT, Replicas, serve_replicas

__all__ = ["RAY_EXTRA_HINT", "Replicas", "aggregate_on_ray", "collect_shards_on_ray", "ray_partials", "serve_replicas"]
