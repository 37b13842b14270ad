"""Rows of a task file: JSON Lines, a JSON array, CSV or TSV, or Parquet, one dict per row.

A row that cannot be read (bad JSON, a CSV line with more cells than the header) comes back as
that row's error, naming it; the rows around it still come. Parquet is read one row group at a
time and in small batches, so a file of embedded images never sits in memory whole.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

TASK_FILE_SUFFIXES = (".jsonl", ".ndjson", ".json", ".csv", ".tsv", ".parquet")
MAX_JSON_ARRAY_BYTES = 512 << 20
"""A .json array is read whole; beyond this, write it as JSON Lines."""
MAX_CSV_FIELD = 256 << 20
"""A CSV cell may hold a base64 image; the csv module's default limit is 128 KiB."""


@dataclass(slots=True)
class Row:
    """One row: where it is (``line 3``, ``row 7``), and its fields or why it cannot be read."""

    where: str
    index: int
    """0-based position among the file's rows (the default task id is built from it)."""
    fields: dict[str, Any] | None
    error: str | None = None


def read_rows(path: Path) -> Iterator[Row]:
    """Every row of ``path``, by its suffix; ValueError for a suffix we do not read."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return _jsonl(path)
    if suffix == ".json":
        return _json(path)
    if suffix in (".csv", ".tsv"):
        return _csv(path, "\t" if suffix == ".tsv" else ",")
    if suffix == ".parquet":
        return _parquet(path)
    raise ValueError(f"{path.name}: tasks are read from {', '.join(TASK_FILE_SUFFIXES)} files, not {suffix or 'this'}")


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 300 else text[:300] + "…"


def _jsonl(path: Path) -> Iterator[Row]:
    index = 0
    with path.open("rb") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"line {lineno}"
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                yield Row(where, index, None, f"not valid JSON ({_one_line(e)})")
            else:
                yield _object(where, index, value)
            index += 1


def _object(where: str, index: int, value: Any) -> Row:
    if not isinstance(value, dict):
        kind = "a list" if isinstance(value, list) else type(value).__name__
        return Row(where, index, None, f"expected a JSON object, got {kind}")
    return Row(where, index, value)


def _json(path: Path) -> Iterator[Row]:
    with path.open("rb") as f:
        head = f.read(1024).lstrip()
    if not head.startswith(b"["):  # JSON Lines under a .json name, as many hub datasets have
        yield from _jsonl(path)
        return
    if path.stat().st_size > MAX_JSON_ARRAY_BYTES:
        raise ValueError(f"{path.name}: a JSON array of {path.stat().st_size:,} bytes is too large to read whole; "
                         "write one object per line (.jsonl)")
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as e:
        raise ValueError(f"{path.name}: not valid JSON ({_one_line(e)})") from None
    for index, value in enumerate(data):
        yield _object(f"item {index}", index, value)


def _csv(path: Path, delimiter: str) -> Iterator[Row]:
    csv.field_size_limit(max(csv.field_size_limit(), MAX_CSV_FIELD))
    with path.open("r", encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, delimiter=delimiter)
        try:
            header = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise ValueError(f"{path.name}: the header cannot be read ({_one_line(e)})") from None
        names = [h.strip() for h in header]
        index = 0
        while True:
            line = reader.line_num + 1
            try:
                cells = next(reader)
            except StopIteration:
                return
            except (csv.Error, UnicodeDecodeError) as e:
                yield Row(f"line {line}", index, None, f"not valid CSV ({_one_line(e)})")
                index += 1
                continue
            if not any(c.strip() for c in cells):
                continue
            where = f"line {line}"
            if len(cells) > len(names):
                yield Row(where, index, None, f"{len(cells)} cells for {len(names)} columns (a separator "
                                               "inside an unquoted cell?)")
            else:
                yield Row(where, index, {n: c for n, c in zip(names, cells, strict=False) if n})
            index += 1


def _parquet(path: Path) -> Iterator[Row]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as e:  # pyarrow's errors are many (ArrowInvalid, OSError): the file is unreadable
        raise ValueError(f"{path.name}: not a readable Parquet file ({_one_line(e)})") from None
    index = 0
    for group in range(pf.num_row_groups):
        table = pf.read_row_group(group)
        for batch in table.to_batches(max_chunksize=32):
            for fields in batch.to_pylist():
                yield Row(f"row {index}", index, fields)
                index += 1
        del table

