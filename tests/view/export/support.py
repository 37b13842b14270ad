"""Helpers of the export tests: the records as every reader takes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson


def latest_records(run_dir: Path) -> list[dict[str, Any]]:
    """Each job's record as every reader takes it (its latest ok line, else its latest line)."""
    out: dict[str, dict[str, Any]] = {}
    for line in (run_dir / "records.jsonl").read_bytes().splitlines():
        rec = orjson.loads(line)
        if rec["status"] == "ok" or out.get(rec["job_id"], {}).get("status") != "ok":
            out[rec["job_id"]] = rec
    return list(out.values())
