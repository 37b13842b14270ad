"""Provider batch APIs: OpenAI Files + ``/v1/batches``, Anthropic Message Batches, Gemini batch mode
(inline requests, or a JSONL file uploaded through the Files API).

Each wire turns our requests into the provider's batch lines (with the body builders of the
interactive providers), creates, retrieves, lists, cancels and downloads batches, and maps the
provider's own status words and per-request outcomes onto one vocabulary (``BatchInfo``,
``ResultLine``). Journaling, gathering and reattaching live in the engine (fasteval.engine.batch.batching).
"""

from providers.batch.base import BatchInfo, BatchSettings, BatchWire, ResultLine, custom_id_ok

__all__ = ["BatchInfo", "BatchSettings", "BatchWire", "ResultLine", "custom_id_ok"]
