"""math_exact: exact-answer math verification with pass@k metrics (see README.md)."""

from gym_metrics_servers.math_exact.app import (
    SAMPLE_PATH,
    MathExactServer,
    MathVerifyRequest,
    MathVerifyResponse,
)

__all__ = ["SAMPLE_PATH", "MathExactServer", "MathVerifyRequest", "MathVerifyResponse"]
