"""Batch lanes: a batched model's requests collected, submitted, polled and collected again under the
never-pay-twice rule.

Imports only the engine's floor.
"""
