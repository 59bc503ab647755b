"""reasoning_gym: reasoning-gym's tasks scored by reasoning-gym's own scorers (see README.md)."""
