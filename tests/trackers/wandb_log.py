"""Reading a W&B offline run back: its ``run-<id>.wandb`` file, record by record.

wandb 0.2x ships no Python reader for its transaction log any more (its service, ``wandb-core``,
reads it); the file is LevelDB's log format (32 KiB blocks of ``crc32, length, type`` framed
chunks) behind a 7-byte W&B header, and each record is W&B's own protobuf ``Record``, parsed here
with the ``wandb.proto`` classes the library ships.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2 as pb

_BLOCK = 32768
_HEADER = struct.Struct("<4sHB")
_CHUNK = struct.Struct("<IHB")
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def records(path: Path) -> Iterator[Any]:
    data = path.read_bytes()
    ident, magic, version = _HEADER.unpack_from(data)
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0), "not a W&B transaction log"
    pos, partial = _HEADER.size, b""
    while pos + _CHUNK.size <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _CHUNK.size:  # a block's tail too short for a chunk header is padding
            pos += left
            continue
        _, length, kind = _CHUNK.unpack_from(data, pos)
        pos += _CHUNK.size
        chunk, pos = data[pos:pos + length], pos + length
        if kind == 0 and length == 0:
            break
        if kind in (_FULL, _LAST):
            rec = pb.Record()
            rec.ParseFromString(partial + chunk if kind == _LAST else chunk)
            partial = b""
            yield rec
        else:
            partial = chunk if kind == _FIRST else partial + chunk


def history(path: Path) -> list[dict[str, Any]]:
    """Every ``run.log(...)`` row of the run, as the values were logged."""
    rows = []
    for rec in records(path):
        if rec.WhichOneof("record_type") == "history":
            rows.append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in rec.history.item})
    return rows


def config(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rec in records(path):
        if rec.WhichOneof("record_type") == "config":
            out.update({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in rec.config.update})
    return out
