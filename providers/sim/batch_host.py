"""What the sim's batch APIs need of the server, and Gemini's batch mode of the shared batch core.

Protocols, as ``SimCore`` is for the native wires: ``batch_api``, ``gemini_batch`` and ``server``
name no class of one another's, so each reads on its own and none imports another to type it.
"""

from __future__ import annotations

from typing import Any, Protocol

from providers.sim.batch_state import SimBatch
from providers.sim.native_wire import AnthropicWire, GeminiWire
from providers.sim.responses_wire import ResponsesWire
from providers.sim.wire import SimCore


class BatchHost(SimCore, Protocol):
    """The server as its batch APIs see it: the core that answers each line, its port (file and
    batch URLs in replies), and each dialect's wire (its prompt-cache model, the Responses core)."""

    port: int
    anthropic_wire: AnthropicWire
    gemini_wire: GeminiWire
    responses_wire: ResponsesWire


class BatchCore(Protocol):
    """The batch core shared by every dialect (``BatchAPIs``), as Gemini's batch mode uses it:
    the batches of all dialects, per-model options and scripted faults, and registration."""

    server: BatchHost
    batches: dict[str, SimBatch]

    def _opts(self, model: str) -> dict[str, Any]: ...

    def _take(self, model: str, fault: str) -> bool: ...

    def _register(self, batch: SimBatch, ids: list[str]) -> None: ...
