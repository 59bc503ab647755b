"""short_answer: a NeMo Gym-style resources server (config YAML, pydantic server, reward_profile
metrics), the worked example of docs/nemo-gym.md."""
