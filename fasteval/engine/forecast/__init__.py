"""What a run will cost before it runs: the dry-run plan and the estimate.

Imports only the engine's floor.
"""
