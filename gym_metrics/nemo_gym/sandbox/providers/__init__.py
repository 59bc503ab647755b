"""NeMo Gym's `nemo_gym.sandbox.providers`: the provider protocol module environments import (base)."""
