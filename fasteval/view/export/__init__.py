"""Run folders out to the tools users already have (``fasteval export``; docs/export.md).

``inspect`` (inspect-ai eval logs, one per model × suite × setting), ``atif`` (one ATIF trajectory
per job) and ``parquet`` (a row per job, and per model request with ``rounds``). Each streams the
run's records one at a time through the run index, and writes into a temporary place renamed to
the output at the end: an interrupted export leaves no half of one behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fasteval.runfolder.index import open_index
from fasteval.view.export.common import ExportError, Selection, output_place, run_info

FORMATS = ("inspect", "atif", "parquet")


def default_out(run_dir: Path, fmt: str) -> Path:
    """Beside the current folder, named after the run: ``<run>.parquet``, ``<run>-inspect/``, ``<run>-atif/``."""
    name = run_dir.resolve().name or "run"
    return Path(f"{name}.parquet") if fmt == "parquet" else Path(f"{name}-{fmt}")


def export_run(run_dir: Path, fmt: str, out: Path | None = None, selection: Selection | None = None, *,
               rounds: bool = False, images: bool = True, force: bool = False) -> dict[str, Any]:
    """Export ``run_dir`` as ``fmt`` to ``out``; what was written (counts and paths)."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r} (known: {', '.join(FORMATS)})")
    selection = selection or Selection()
    out = out or default_out(run_dir, fmt)
    with open_index(run_dir) as index, index.snapshot():
        info = run_info(run_dir, index)
        if fmt == "parquet":
            from fasteval.view.export.parquet import export_parquet, rounds_path

            extra = rounds_path(out) if rounds else None
            with output_place(out, force=force) as tmp:
                if extra is None:
                    counts = export_parquet(index, info, selection, tmp)
                else:
                    with output_place(extra, force=force) as tmp_rounds:
                        counts = export_parquet(index, info, selection, tmp, rounds_dest=tmp_rounds)
            paths = [str(out)] + ([str(extra)] if extra is not None else [])
        elif fmt == "atif":
            from fasteval.view.export.atif import export_atif

            with output_place(out, force=force) as tmp:
                counts = export_atif(index, info, selection, tmp, with_images=images)
            paths = [str(out)]
        else:
            from fasteval.view.export.inspect_log import export_inspect

            with output_place(out, force=force) as tmp:
                counts = export_inspect(index, info, selection, tmp, with_images=images)
            paths = [str(out)]
    return {"format": fmt, "out": paths, "partial": info.partial, **counts}


__all__ = ["FORMATS", "ExportError", "Selection", "default_out", "export_run"]
