"""Environments from other libraries, each in a subpackage of its own and behind an optional
extra: `reasoning_gym` (`gym-metrics[reasoning-gym]`). Nothing here imports a third-party
library at load time, so the core stays free of them."""
