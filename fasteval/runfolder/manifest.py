"""The run folder's manifest: the config it was started with, its plan, and what is current.

``identity`` (written by the sweep, fasteval.engine.identity) says which fingerprint each model ×
suite × setting of the config has now; a record whose names are in the config under another
fingerprint is superseded, and every reader can tell that from the manifest alone (no config).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Any

import orjson

from fasteval.core.errors import DamagedRunFolder
from fasteval.runfolder.names import MANIFEST
from fasteval.runfolder.safe_open import open_nofollow, refuse_symlink

CurrentGroups = dict[tuple[str, str, str], frozenset[str]]
"""(model, suite, setting) -> the group fingerprints the config has for it now (two entries of one
suite with different options are two groups under one name)."""


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    tmp = run_dir / (MANIFEST + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # a leftover (or a planted link) is replaced, never written through
    fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, MANIFEST)
    with os.fdopen(fd, "wb") as f:
        f.write(orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    os.replace(tmp, run_dir / MANIFEST)


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    p = run_dir / MANIFEST
    refuse_symlink(p, MANIFEST)  # a linked manifest would hand rescore and resume another config
    if not p.exists():
        return None
    try:
        data = orjson.loads(p.read_bytes())
    except orjson.JSONDecodeError as e:
        raise DamagedRunFolder(f"{p}: not the manifest fasteval writes ({e}); restore it or use a new --run-dir") from None
    if not isinstance(data, dict):
        raise DamagedRunFolder(f"{p}: not the manifest fasteval writes (a JSON {type(data).__name__}, not an object); "
                               "restore it or use a new --run-dir")
    return data


def current_groups(manifest: dict[str, Any] | None) -> CurrentGroups:
    """The manifest's current groups: what makes a record current (empty: nothing is superseded)."""
    out: dict[tuple[str, str, str], set[str]] = {}
    identity = (manifest or {}).get("identity")
    for entry in (identity.get("current") if isinstance(identity, dict) else None) or []:
        if isinstance(entry, list) and len(entry) == 4 and all(isinstance(x, str) for x in entry):
            out.setdefault((entry[0], entry[1], entry[2]), set()).add(entry[3])
    return {k: frozenset(v) for k, v in out.items()}


def groups_digest(groups: CurrentGroups) -> str:
    """A short digest of a set of current groups: the index notes which set its flags follow."""
    text = "\n".join(sorted(f"{m}\x1f{s}\x1f{st}\x1f{g}" for (m, s, st), gs in groups.items() for g in gs))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
