"""Pooled, confined Python execution for model-written code (see docs/sandbox.md)."""

from sandbox._pool import OutputImage, RunResult, SandboxLimits, SandboxPool, SandboxStartError, input_name

__all__ = ["OutputImage", "RunResult", "SandboxLimits", "SandboxPool", "SandboxStartError", "input_name"]
