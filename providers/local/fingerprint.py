"""Checkpoint identity: what a run folder's results were computed with.

A local checkpoint's fingerprint hashes its small files (config, tokenizer, chat template,
generation settings) and the names and sizes of its weight files: cheap on a 100 GB folder,
and a retrained or re-exported checkpoint under the same path changes it. A hub id is identified
by the id and, when the local Hugging Face cache holds it, the revision ``refs/main`` points at
(so a newer download of the same id is a different checkpoint).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

_CONTENT_LIMIT = 32 * 1024 * 1024
_WEIGHT_SUFFIXES = frozenset({".safetensors", ".bin", ".pt", ".pth", ".gguf", ".msgpack", ".h5", ".ckpt"})


def checkpoint_identity(model: str) -> dict[str, Any]:
    """{"path", "kind": "local" | "hub", "fingerprint"} for a serve.model value."""
    path = Path(model).expanduser()
    if not path.is_dir():
        revision = hub_revision(model)
        key = f"hub:{model}@{revision or ''}"
        return {"path": model, "kind": "hub", "revision": revision,
                "fingerprint": hashlib.sha256(key.encode()).hexdigest()[:16]}
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file() and not any(part.startswith(".") for part in
                                                                          p.relative_to(path).parts)):
        rel = f.relative_to(path).as_posix()
        size = f.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        if f.suffix not in _WEIGHT_SUFFIXES and size <= _CONTENT_LIMIT:
            h.update(hashlib.sha256(f.read_bytes()).digest())
    return {"path": str(path.resolve()), "kind": "local", "fingerprint": h.hexdigest()[:16]}


def hub_revision(model_id: str) -> str | None:
    """The commit the local Hugging Face cache's ``refs/main`` names for ``model_id``, if cached."""
    root = os.environ.get("HF_HUB_CACHE") or str(Path(os.environ.get("HF_HOME", "~/.cache/huggingface")) / "hub")
    ref = Path(root).expanduser() / f"models--{model_id.replace('/', '--')}" / "refs" / "main"
    try:
        return ref.read_text().strip() or None
    except OSError:
        return None
