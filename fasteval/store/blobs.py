"""The images a stored record refers to travel with it: run folder -> store -> run folder.

A trajectory names images by sha256 (task images in its messages, tool outputs in its tool
calls). A record goes into the store only after its images do, and comes out of it only with
them, so a reused trajectory shows in the viewer like one that ran. Files are hard-linked where
the two folders share a filesystem, else copied through a temporary name and renamed: two
writers of one blob write the same bytes, so the last rename wins harmlessly.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from fasteval.runfolder.blobs import BLOB_REF, blob_file


def image_refs(record: Any) -> set[str]:
    """Every image reference in a record's trajectory (image parts of messages, tool calls' images):
    a record as read back (a dict) or as a sweep writes it (``Record`` with a ``Trajectory``)."""
    traj = record.get("trajectory") if isinstance(record, dict) else getattr(record, "trajectory", None)
    if traj is None:
        return set()
    messages = traj.get("messages") if isinstance(traj, dict) else getattr(traj, "messages", None)
    calls = traj.get("tool_calls") if isinstance(traj, dict) else getattr(traj, "tool_calls", None)
    out = set(_walk(messages))
    for call in calls or []:
        images = call.get("images") if isinstance(call, dict) else getattr(call, "images", None)
        out.update(r for r in images or [] if isinstance(r, str) and BLOB_REF.match(r))
    return out


def _walk(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        ref = value.get("image")
        if value.get("type") == "image" and isinstance(ref, str) and BLOB_REF.match(ref):
            yield ref
        for v in value.values():
            if isinstance(v, dict | list):
                yield from _walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v)


def copy_blobs(src_root: Path, dst_root: Path, refs: Iterable[str]) -> int:
    """Put each blob of ``src_root`` named in ``refs`` under ``dst_root`` (if not there); returns the
    number missing at the source (a record whose images are gone is still copied: text stays)."""
    missing = 0
    for ref in refs:
        dst = blob_file(dst_root, ref)
        if dst.exists():
            continue
        src = blob_file(src_root, ref)
        if not src.is_file() or src.is_symlink():
            missing += 1
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dst)
            continue
        except FileExistsError:
            continue
        except OSError:
            pass  # another filesystem (or links not allowed): copy
        tmp = dst.parent / f".tmp-{secrets.token_hex(6)}"
        try:
            shutil.copyfile(src, tmp, follow_symlinks=False)
            os.replace(tmp, dst)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
    return missing
