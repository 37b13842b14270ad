"""Reading a reference harness's prediction file for ``fasteval score-file``.

VLMEvalKit writes the dataset rows (image dropped) plus ``prediction`` as xlsx (default), tsv or
a JSON list of rows (§0.1). Its ``evaluate`` lower-cases every column name except single capital
letters; an empty prediction cell of an xlsx / tsv reads back as NaN, which the MCQ scorers turn
into the text ``'nan'`` (``was_empty`` marks those rows so each suite can apply its own rule).
xlsx is read with the standard library (xlsx.py says why), so no extra is needed for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from fasteval.suites.mcq.tables import iter_rows
from fasteval.suites.mcq.xlsx import xlsx_rows


def _columns(row: dict[str, Any]) -> dict[str, Any]:
    return {(k if len(k) == 1 and k.isupper() else k.lower()): v for k, v in row.items()}


def read_predictions(path: Path) -> list[dict[str, Any]]:
    """Rows with VLMEvalKit's column names; ``prediction`` is always a string, and ``was_empty``
    is True where the cell was empty (NaN after an xlsx / tsv round trip)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".xlsx":
        raw = xlsx_rows(path)
    elif suffix in (".tsv", ".json", ".jsonl"):
        raw = list(iter_rows(path))
    else:
        raise ValueError(f"{path}: expected a VLMEvalKit prediction file (.xlsx, .tsv or .json)")
    out = []
    for n, row in enumerate(raw):
        if "__bad__" in row:
            raise ValueError(f"{path}: {row['__bad__']}")
        row = _columns(row)
        if "prediction" not in row:
            raise ValueError(f"{path}: row {n} has no 'prediction' column")
        pred = row["prediction"]
        empty = pred is None or (isinstance(pred, float) and pred != pred) or (
            suffix in (".xlsx", ".tsv") and pred == "")
        row["was_empty"] = empty
        row["prediction"] = "" if pred is None else (str(pred) if not isinstance(pred, str) else pred)
        out.append(row)
    return out


def index_key(row: dict[str, Any]) -> str:
    value = row.get("index")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if value is None or str(value).strip() == "":
        raise ValueError("a prediction row has no 'index'")
    return str(value).strip()


def read_lmms_samples(path: Path) -> list[dict[str, Any]]:
    """lmms-eval's ``--log_samples`` rows (a JSONL file, or a JSON list / ``{"logs": [...]}``)."""
    path = Path(path)
    if path.suffix.lower() == ".jsonl":
        return [r for r in iter_rows(path)]
    data = orjson.loads(path.read_bytes())
    if isinstance(data, dict) and isinstance(data.get("logs"), list):
        data = data["logs"]
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected lmms-eval sample rows")
    return [r for r in data if isinstance(r, dict)]


def first_text(value: Any) -> str:
    """The first string inside lmms-eval's nested ``resps`` / ``filtered_resps`` lists."""
    while isinstance(value, list) and value:
        value = value[0]
    return value if isinstance(value, str) else ""
