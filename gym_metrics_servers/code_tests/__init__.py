"""code_tests: Python programs scored against test cases in the sandbox (see README.md)."""

from gym_metrics_servers.code_tests.app import (
    SAMPLE_PATH,
    CodeTest,
    CodeTestsServer,
    CodeTestsVerifyRequest,
    CodeTestsVerifyResponse,
)

__all__ = ["SAMPLE_PATH", "CodeTest", "CodeTestsServer", "CodeTestsVerifyRequest", "CodeTestsVerifyResponse"]
