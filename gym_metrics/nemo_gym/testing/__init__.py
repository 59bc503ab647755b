"""NeMo Gym's helpers for an environment's own tests (`nemo_gym.testing`): import them from
tests, not from server code."""
