"""inventory: a stateful tool environment, the worked example of tools and sessions (see README.md)."""

from gym_metrics_servers.inventory.app import (
    SAMPLE_PATH,
    InventoryServer,
    InventoryVerifyRequest,
    InventoryVerifyResponse,
)

__all__ = ["SAMPLE_PATH", "InventoryServer", "InventoryVerifyRequest", "InventoryVerifyResponse"]
