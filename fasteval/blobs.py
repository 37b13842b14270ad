"""Content-addressed image store in the run folder.

Images live once on disk under their sha256; trajectories and records carry only the hash.
Writes go through a temp file and rename so a crash never leaves a half-written blob.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

from fasteval.types import ImageRef


class BlobStore:
    """Files named by content hash: ``root/ab/abcdef...``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, ref: ImageRef) -> Path:
        return self.root / ref[:2] / ref

    def put(self, data: bytes) -> ImageRef:
        ref = hashlib.sha256(data).hexdigest()
        p = self.path(ref)
        if not p.exists():
            p.parent.mkdir(exist_ok=True)
            # A unique temp name per writer: tools in threads and other processes may put the same image.
            tmp = p.with_name(f"{ref}.tmp-{os.getpid()}-{uuid.uuid4().hex[:12]}")
            tmp.write_bytes(data)
            os.replace(tmp, p)
        return ref

    def put_file(self, path: str | os.PathLike[str]) -> ImageRef:
        return self.put(Path(path).read_bytes())

    def get(self, ref: ImageRef) -> bytes:
        try:
            return self.path(ref).read_bytes()
        except FileNotFoundError:
            raise KeyError(f"image {ref} is not in the blob store {self.root}") from None

    def __contains__(self, ref: object) -> bool:
        return isinstance(ref, str) and self.path(ref).exists()
