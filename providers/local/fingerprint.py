"""Checkpoint identity: what a run folder's results were computed with.

A local checkpoint's fingerprint hashes its small files (config, tokenizer, chat template,
generation settings) whole, and of each large file (the weights) its size, its safetensors
header (every tensor's name, dtype, shape and offsets) and samples of its bytes: 64 KiB at 256
evenly spaced places, and the first and middle 4 KiB of every tensor the header names. So a
retrained or re-exported checkpoint under the same path changes it even when every size is the
same (a training step changes every tensor it touches, a layer norm included), while reading a
few MB per shard, not the shard: cheap on a 100 GB folder. Content only, no modification time,
so a copy of the same checkpoint (``rsync`` to a node's local disk) keeps its identity.

What it cannot see: an edit confined to bytes no sample covers (a few weights changed by hand in
the middle of a large tensor). docs/serving.md says so.

A hub id is identified by the id and, when the local Hugging Face cache holds it, the revision
``refs/main`` points at (so a newer download of the same id is a different checkpoint).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any, BinaryIO

SCHEME = "content-sampled-1"
"""Recorded beside each fingerprint: a manifest without it holds the older names-and-sizes one."""
_CONTENT_LIMIT = 32 * 1024 * 1024
"""Files up to this size are hashed whole (configs, tokenizers, a small model's weights)."""
_WEIGHT_SUFFIXES = frozenset({".safetensors", ".bin", ".pt", ".pth", ".gguf", ".msgpack", ".h5", ".ckpt"})
_SPREAD_SAMPLES = 256
_SPREAD_BYTES = 64 * 1024
_TENSOR_BYTES = 4096
_MAX_TENSORS = 100_000
_MAX_HEADER = 100 * 1024 * 1024
"""safetensors' own limit on its JSON header."""


def checkpoint_identity(model: str, *, legacy: bool = False) -> dict[str, Any]:
    """{"path", "kind": "local" | "hub", "fingerprint", "scheme"} for a serve.model value.

    ``legacy``: the fingerprint of names and sizes only that run folders made before content
    sampling recorded (to compare an old manifest's entry with what it meant).
    """
    path = Path(model).expanduser()
    if not path.is_dir():
        revision = hub_revision(model)
        key = f"hub:{model}@{revision or ''}"
        return {"path": model, "kind": "hub", "revision": revision,
                "fingerprint": hashlib.sha256(key.encode()).hexdigest()[:16], "scheme": SCHEME}
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file() and not any(part.startswith(".") for part in
                                                                          p.relative_to(path).parts)):
        rel = f.relative_to(path).as_posix()
        size = f.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        if legacy:
            if f.suffix not in _WEIGHT_SUFFIXES and size <= _CONTENT_LIMIT:
                h.update(hashlib.sha256(f.read_bytes()).digest())
            continue
        h.update(file_digest(f))
    out = {"path": str(path.resolve()), "kind": "local", "fingerprint": h.hexdigest()[:16]}
    return out if legacy else {**out, "scheme": SCHEME}


def file_digest(path: Path) -> bytes:
    """A file's content digest: whole up to ``_CONTENT_LIMIT``, sampled past it (see the module)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size <= _CONTENT_LIMIT:
            h.update(f.read())
            return h.digest()
        spans = [(i * (size - _SPREAD_BYTES) // (_SPREAD_SAMPLES - 1), _SPREAD_BYTES) for i in range(_SPREAD_SAMPLES)]
        header, tensors = _safetensors_layout(f, size) if path.suffix == ".safetensors" else (b"", [])
        h.update(header)
        for start, end in tensors:
            spans += [(start, min(_TENSOR_BYTES, end - start)), ((start + end) // 2, min(_TENSOR_BYTES, end - start))]
        for offset, length in sorted(set(spans)):
            f.seek(offset)
            h.update(offset.to_bytes(8, "little") + f.read(length))
    return h.digest()


def _safetensors_layout(f: BinaryIO, size: int) -> tuple[bytes, list[tuple[int, int]]]:
    """(the header's bytes, each tensor's absolute (start, end)); what is not a valid header gives none."""
    raw = f.read(8)
    if len(raw) < 8:
        return raw, []
    (n,) = struct.unpack("<Q", raw)
    if n > min(_MAX_HEADER, size - 8):
        return raw, []
    header = f.read(n)
    try:
        meta = json.loads(header)
    except (ValueError, RecursionError):
        return raw + header, []
    spans: list[tuple[int, int]] = []
    if isinstance(meta, dict):
        for value in list(meta.values())[:_MAX_TENSORS]:
            offsets = value.get("data_offsets") if isinstance(value, dict) else None
            if isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets) \
                    and 0 <= offsets[0] <= offsets[1] <= size - 8 - n:
                spans.append((8 + n + offsets[0], 8 + n + offsets[1]))
    return raw + header, spans


def hub_revision(model_id: str) -> str | None:
    """The commit the local Hugging Face cache's ``refs/main`` names for ``model_id``, if cached."""
    root = os.environ.get("HF_HUB_CACHE") or str(Path(os.environ.get("HF_HOME", "~/.cache/huggingface")) / "hub")
    ref = Path(root).expanduser() / f"models--{model_id.replace('/', '--')}" / "refs" / "main"
    try:
        return ref.read_text().strip() or None
    except OSError:
        return None
