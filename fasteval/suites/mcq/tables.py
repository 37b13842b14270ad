"""Reading the release tables these benchmarks ship: TSV / parquet with base64 images, JSON rows.

Rows are streamed one at a time (csv reader, parquet record batches of a few rows), and each
image is decoded from base64 straight into the blob store, so an 8K release of several GB never
sits in memory: a Task holds the image's content hash, and the pixels are decoded lazily by the
image layer when a request is encoded or a tool crops the original.
"""

from __future__ import annotations

import base64
import binascii
import csv
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from fasteval.core.types import ImageRef
from fasteval.runfolder.blobs import BlobStore

TABLE_SUFFIXES = (".tsv", ".parquet", ".json", ".jsonl")
PARQUET_BATCH_ROWS = 4
"""Rows per parquet batch: an 8K base64 image is ~10 MB, so a batch stays small."""


class RowError(ValueError):
    """A field of one row is missing or malformed; the suite yields it as a LoadError."""


def iter_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a TSV, parquet, JSON array or JSONL file, in file order, one at a time."""
    suffix = path.suffix.lower()
    if suffix == ".tsv":
        csv.field_size_limit(sys.maxsize)
        with path.open(newline="", encoding="utf-8") as f:
            yield from csv.DictReader(f, delimiter="\t")
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        for batch in pf.iter_batches(batch_size=PARQUET_BATCH_ROWS):
            yield from batch.to_pylist()
    elif suffix == ".jsonl":
        with path.open("rb") as f:
            for n, line in enumerate(f):
                if line.strip():
                    row = orjson.loads(line)
                    yield row if isinstance(row, dict) else {"__bad__": f"line {n + 1} is not an object"}
    elif suffix == ".json":
        data = orjson.loads(path.read_bytes())
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON array of rows, got {type(data).__name__}")
        for n, row in enumerate(data):
            yield row if isinstance(row, dict) else {"__bad__": f"row {n} is not an object"}
    else:
        raise ValueError(f"{path}: unsupported table format {suffix!r} (expected one of {TABLE_SUFFIXES})")


def image_bytes(value: Any, field: str = "image") -> bytes:
    """Image bytes from base64 text, raw bytes, or a parquet image struct ``{"bytes": ...}``."""
    if isinstance(value, Mapping):
        value = value.get("bytes")
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
    elif isinstance(value, str) and value.strip():
        try:
            data = base64.b64decode(value, validate=False)
        except (binascii.Error, ValueError) as e:
            raise RowError(f"field {field!r} is not base64 ({e})") from None
    else:
        raise RowError(f"field {field!r} must hold an image (base64 text or bytes), got {type(value).__name__}")
    if not data:
        raise RowError(f"field {field!r} is empty")
    return data


class ImageColumn:
    """Images of a VLMEvalKit-style table into the blob store. A short all-digit ``image`` value
    names another row's ``index`` whose image it reuses (how those TSVs avoid repeating bytes)."""

    def __init__(self, blobs: BlobStore) -> None:
        self.blobs = blobs
        self.by_index: dict[str, ImageRef] = {}

    def put(self, row: Mapping[str, Any], index: str, field: str = "image") -> ImageRef:
        value = row.get(field)
        if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 64:
            ref = self.by_index.get(value.strip())
            if ref is None:
                raise RowError(f"field {field!r} refers to row index {value.strip()!r}, which has no image before it")
        else:
            ref = self.blobs.put(image_bytes(value, field))
        self.by_index[index] = ref
        return ref


def text_field(row: Mapping[str, Any], name: str, *, required: bool = True) -> str:
    """A string field (numbers are written as text; NaN-ish empties are missing)."""
    value = row.get(name)
    if isinstance(value, bool) or value is None or (isinstance(value, float) and value != value):
        value = None
    elif isinstance(value, int | float):
        value = str(int(value)) if float(value).is_integer() else str(value)
    if not isinstance(value, str) or not value.strip():
        if required:
            raise RowError(f"field {name!r} must be a non-empty string, got {row.get(name)!r:.80}")
        return ""
    return value


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def letter_options(row: Mapping[str, Any]) -> list[str]:
    """Option texts of the letter columns A, B, ... present and non-empty, in letter order."""
    out: list[str] = []
    for letter in LETTERS:
        value = text_field(row, letter, required=False)
        if not value:
            break
        out.append(value)
    return out
