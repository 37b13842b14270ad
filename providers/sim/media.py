"""Image URLs as the sim reads them: data URLs always, ``file://`` only under an allowed root.

This mirrors vLLM's ``--allowed-local-media-path``: a server started without it refuses
``file://`` images, and one started with it serves only files inside that folder (after
resolving symlinks and ``..``), so a client cannot make the server read arbitrary files.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse


def image_urls(body: dict[str, Any]) -> list[str]:
    """Every ``image_url`` URL in the request, in order."""
    urls: list[str] = []
    for m in body.get("messages") or []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            for p in content:
                if isinstance(p, dict) and p.get("type") == "image_url":
                    urls.append(str((p.get("image_url") or {}).get("url", "")))
    return urls


def local_path(url: str, allowed_root: Path | None) -> Path:
    """The file a ``file://`` URL names, if the server may read it; ValueError says why not."""
    if allowed_root is None:
        raise ValueError("cannot load local files without --allowed-local-media-path")
    parsed = urlparse(url)
    if parsed.netloc not in ("", "localhost"):
        raise ValueError(f"file URL with a remote host is not allowed: {url[:200]}")
    path = Path(os.path.realpath(unquote(parsed.path)))
    root = Path(os.path.realpath(allowed_root))
    if not path.is_relative_to(root):
        raise ValueError(f"the file path {str(path)[:200]} must be a subpath of --allowed-local-media-path {root}")
    if not path.is_file():
        raise ValueError(f"the file {str(path)[:200]} does not exist")
    return path


def check_local_media(body: dict[str, Any], allowed_root: Path | None) -> tuple[int, str | None]:
    """(number of ``file://`` images, None) when all may be served, else (n, a one-line reason)."""
    n = 0
    for url in image_urls(body):
        if url.startswith("file:"):
            n += 1
            try:
                local_path(url, allowed_root)
            except ValueError as e:
                return n, str(e)
    return n, None


def image_bytes(url: str, allowed_root: Path | None = None) -> bytes:
    """The encoded image behind a data URL or an allowed ``file://`` URL."""
    if url.startswith("file:"):
        return local_path(url, allowed_root).read_bytes()
    return base64.b64decode(url.split(",", 1)[1])
