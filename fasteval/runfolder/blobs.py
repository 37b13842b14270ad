"""Content-addressed image store in the run folder.

Images live once on disk under their sha256; trajectories and records carry only the hash.
Writes go through a temp file and rename so a crash never leaves a half-written blob; a failed
write removes its temp file, and temp files of dead writers are cleaned when a sweep starts.
A write that fails for a reason no retry fixes (full disk, deleted folder) is reported through
``on_failure`` so the sweep can stop at once instead of erroring every later job.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import uuid
from collections.abc import Callable
from pathlib import Path

from fasteval.core.types import ImageRef
from fasteval.runfolder.diskfaults import is_fatal
from fasteval.runfolder.safe_open import open_nofollow, refuse_symlink

TEMP_MARK = ".tmp-"
BLOB_REF = re.compile(r"[0-9a-f]{64}\Z")
"""What an image reference is (a sha256): anything else in a record (``../../etc/shadow``) is refused."""


def blob_file(root: Path, ref: object) -> Path:
    """The file of ``ref`` under the blob store ``root``; ValueError for a reference that is not one.

    The store and the shard folder must not be symbolic links; open the file itself with
    ``open_blob`` (``O_NOFOLLOW``), so a planted link never puts another file into a report.
    """
    if not isinstance(ref, str) or not BLOB_REF.match(ref):
        raise ValueError(f"{str(ref)[:80]!r} is not an image reference (64 hex digits)")
    shard = root / ref[:2]
    refuse_symlink(root, "the blob store")
    refuse_symlink(shard, "a blob folder")
    return shard / ref


def open_blob(root: Path, ref: object) -> int:
    """A read-only descriptor of a blob (FileNotFoundError, ValueError, or UnsafeRunFolder for a link)."""
    return open_nofollow(blob_file(root, ref), os.O_RDONLY, "a blob")


def read_blob(root: Path, ref: object) -> bytes:
    """The bytes of a blob, refusing references that are not hashes and files that are links."""
    with os.fdopen(open_blob(root, ref), "rb") as f:
        return f.read()


def pid_alive(pid: int) -> bool:
    """Is this process alive? (Temp files and folders named after a dead pid are stale.)"""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class BlobStore:
    """Files named by content hash: ``root/ab/abcdef...``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.on_failure: Callable[[OSError, Path], None] | None = None
        """Called (from any thread) with a fatal write error and the path it concerned."""

    def path(self, ref: ImageRef) -> Path:
        return self.root / ref[:2] / ref

    def put(self, data: bytes) -> ImageRef:
        ref = hashlib.sha256(data).hexdigest()
        p = self.path(ref)
        if not p.exists():
            # A unique temp name per writer: tools in threads and other processes may put the same image.
            tmp = p.with_name(f"{ref}{TEMP_MARK}{os.getpid()}-{uuid.uuid4().hex[:12]}")
            try:
                p.parent.mkdir(exist_ok=True)
                tmp.write_bytes(data)
                os.replace(tmp, p)
            except OSError as e:
                with contextlib.suppress(OSError):
                    tmp.unlink()
                if is_fatal(e) and self.on_failure is not None:
                    self.on_failure(e, p)
                raise
        return ref

    def put_file(self, path: str | os.PathLike[str]) -> ImageRef:
        return self.put(Path(path).read_bytes())

    def get(self, ref: ImageRef) -> bytes:
        try:
            return read_blob(self.root, ref)
        except ValueError:
            raise KeyError(f"{str(ref)[:80]!r} is not an image reference") from None
        except FileNotFoundError as e:
            if not self.root.is_dir() and self.on_failure is not None:
                self.on_failure(e, self.root)  # the whole store vanished, not one image
            raise KeyError(f"image {ref} is not in the blob store {self.root}") from None

    def __contains__(self, ref: object) -> bool:
        return isinstance(ref, str) and self.path(ref).exists()

    def clean_temp(self, *, own: bool = False) -> int:
        """Remove temp files left by writers that are gone (``own``: this process's too); returns the count.

        At start, only temp files of dead processes go (another process may be writing); at
        exit, this process's own leftovers go as well.
        """
        removed = 0
        try:
            shards = [e for e in os.scandir(self.root) if e.is_dir(follow_symlinks=False)]
        except OSError:
            return 0
        for shard in shards:
            try:
                entries = list(os.scandir(shard.path))
            except OSError:
                continue
            for entry in entries:
                _, mark, tail = entry.name.partition(TEMP_MARK)
                if not mark:
                    continue
                pid_text = tail.split("-", 1)[0]
                pid = int(pid_text) if pid_text.isdigit() else -1
                if pid == os.getpid() and not own:
                    continue
                if pid != os.getpid() and pid > 0 and pid_alive(pid):
                    continue
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                    removed += 1
        return removed
