"""Checkpoint identity: what a run folder's results were computed with.

A local checkpoint's fingerprint hashes its small files (config, tokenizer, chat template,
generation settings) and the names and sizes of its weight files: cheap on a 100 GB folder,
and a retrained or re-exported checkpoint under the same path changes it. A hub id that is not
a local folder is identified by the id alone.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

_CONTENT_LIMIT = 32 * 1024 * 1024
_WEIGHT_SUFFIXES = frozenset({".safetensors", ".bin", ".pt", ".pth", ".gguf", ".msgpack", ".h5", ".ckpt"})


def checkpoint_identity(model: str) -> dict[str, Any]:
    """{"path", "kind": "local" | "hub", "fingerprint"} for a serve.model value."""
    path = Path(model).expanduser()
    if not path.is_dir():
        return {"path": model, "kind": "hub", "fingerprint": hashlib.sha256(f"hub:{model}".encode()).hexdigest()[:16]}
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file() and not any(part.startswith(".") for part in
                                                                          p.relative_to(path).parts)):
        rel = f.relative_to(path).as_posix()
        size = f.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        if f.suffix not in _WEIGHT_SUFFIXES and size <= _CONTENT_LIMIT:
            h.update(hashlib.sha256(f.read_bytes()).digest())
    return {"path": str(path.resolve()), "kind": "local", "fingerprint": h.hexdigest()[:16]}
