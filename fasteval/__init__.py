"""fasteval: a high-throughput async evaluator for multimodal models that think with images.

The Python API (docs/python-api.md)::

    import fasteval
    summary = fasteval.run("configs/demo.yaml", run_dir="runs/demo", limit=2, models=["sim-oracle"])
    for record in fasteval.load_records("runs/demo"):
        ...

Heavy modules are imported on first use, so ``import fasteval`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fasteval.api import RunSummary, load_records, run

    __version__: str

__all__ = ["RunSummary", "__version__", "load_records", "run"]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from fasteval.core.version import fasteval_version

        value = globals()["__version__"] = fasteval_version()
        return value
    if name in ("run", "load_records", "RunSummary"):
        from fasteval import api

        return getattr(api, name)
    raise AttributeError(f"module 'fasteval' has no attribute {name!r}")
