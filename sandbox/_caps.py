"""Caps on every field of a call's reply, applied where it is built and again where it is read.

The call child caps what it sends (so a 50 MB exception never crosses a pipe), the worker caps
what it forwards, and the pool caps what it returns: each stage trusts nothing upstream, because
upstream runs or ran model code. A field that does not fit is truncated with a visible note, an
image that does not fit is dropped with a note on stderr; nothing here raises for bad values.
"""

from __future__ import annotations

import io
import signal
import warnings
from collections.abc import Callable
from typing import Any

from sandbox._protocol import Bounds

ERROR_CHARS = 2_000
NAME_CHARS = 255
PATH_CHARS = 1_024
NOTE_SLACK = 200  # room for the truncation note appended to a capped text
STATUSES = frozenset({"ok", "error", "timeout", "crashed"})


def reply_bounds(limits: dict[str, Any]) -> Bounds:
    """The largest reply frame a capped call can produce; anything larger is an attack or a bug.

    JSON may spend up to 12 bytes on one character (an escaped surrogate pair), hence the factor.
    """
    chars = 2 * (int(limits["output_chars"]) + NOTE_SLACK * 6) + ERROR_CHARS + 64
    names = int(limits["max_output_images"]) * (NAME_CHARS + PATH_CHARS + 64)
    return Bounds(
        header=12 * (chars + names) + 4096,
        blobs=int(limits["max_output_images"]),
        blob_bytes=int(limits["file_bytes"]),
        total_bytes=int(limits["max_output_bytes"]),
    )


def clock_marks(value: Any, names: tuple[str, ...]) -> dict[str, float]:
    """The named timestamps (seconds of the shared monotonic clock) of an untrusted reply field."""
    if not isinstance(value, dict):
        return {}
    marks = {k: value.get(k) for k in names}
    return {k: float(v) for k, v in marks.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def exit_reason(returncode: int | None) -> str:
    """Why a process ended, in words a model and a person can act on."""
    if returncode is None:
        return "stopped responding"
    if returncode >= 0:
        return f"exited with code {returncode}"
    sig = -returncode
    reasons: dict[int, str] = {
        signal.SIGKILL: "was killed (SIGKILL): out of memory or killed",
        signal.SIGSEGV: "crashed with a segmentation fault (SIGSEGV)",
        signal.SIGXCPU: "exceeded its CPU time limit (SIGXCPU)",
        signal.SIGABRT: "aborted (SIGABRT)",
        signal.SIGBUS: "crashed with a bus error (SIGBUS)",
    }
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = str(sig)
    return reasons.get(sig, f"was killed by signal {name}")


def cap_text(value: Any, limit: int) -> str:
    """A string of at most ``limit`` characters plus a short note saying how much was cut."""
    text = value if isinstance(value, str) else ("" if value is None else repr(value)[:limit])
    if len(text) <= limit + NOTE_SLACK:
        return text
    return text[:limit] + f"\n[... truncated: {len(text) - limit} more characters not shown]"


def one_line(value: Any, limit: int = ERROR_CHARS) -> str:
    """The last non-empty line of a message (the first, for a huge one), at most ``limit`` characters."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) > 16 * limit:  # a huge message: its head names the exception; never split it all
        lines = [ln for ln in text[: 4 * limit].splitlines() if ln.strip()] or [""]
        line = lines[0]
    else:
        lines = [ln for ln in text.splitlines() if ln.strip()] or [""]
        line = lines[-1]
    return line if len(line) <= limit else line[:limit] + f" [... {len(line) - limit} more characters]"


def image_pixels(data: bytes) -> int | None:
    """Pixel count from the image header only (no decode); None if it is not a readable image."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(io.BytesIO(data)) as im:
                w, h = im.size
    except Image.DecompressionBombError:
        return 1 << 62
    except Exception:  # any undecodable header: the image is refused, the call is not failed
        return None
    return int(w) * int(h)


def cap_reply(
    reply: dict[str, Any],
    blobs: list[bytes],
    limits: dict[str, Any],
    pixels: Callable[[bytes], int | None] | None = None,
) -> tuple[dict[str, Any], list[bytes]]:
    """A reply whose every field fits ``limits``; images that do not fit are dropped with a note.

    ``pixels`` (e.g. ``image_pixels``) also checks the images' pixel size; the worker leaves it
    out so that it never parses untrusted image headers with its privileges.
    """
    out_chars = int(limits["output_chars"])
    status = reply.get("status")
    notes: list[str] = []
    images: list[dict[str, str]] = []
    kept: list[bytes] = []
    outputs = reply.get("outputs")
    listed = outputs if isinstance(outputs, list) else []
    budget = int(limits["max_output_bytes"])
    for entry, data in zip(listed, blobs, strict=False):
        if len(images) >= int(limits["max_output_images"]):
            notes.append(f"dropped images beyond the first {limits['max_output_images']}")
            break
        entry = entry if isinstance(entry, dict) else {}
        name = cap_text(entry.get("name"), NAME_CHARS)[:NAME_CHARS] or "image"
        path = cap_text(entry.get("path"), PATH_CHARS)[:PATH_CHARS] or name
        why = _refusal(data, budget, limits, pixels)
        if why:
            notes.append(f"dropped {name[:80]}: {why}")
            continue
        budget -= len(data)
        images.append({"name": name, "path": path})
        kept.append(data)
    stderr = cap_text(reply.get("stderr"), out_chars)
    if notes:
        stderr += "".join(f"\n[sandbox: {n}]" for n in notes[:4])
    stdout_chars = reply.get("stdout_chars")
    error = reply.get("error")
    clean = {
        "status": status if status in STATUSES else "crashed",
        "error": None if error is None and status == "ok" else one_line(error or "malformed reply from the sandbox"),
        "stdout": cap_text(reply.get("stdout"), out_chars),
        "stderr": stderr,
        "stdout_chars": stdout_chars if type(stdout_chars) is int and stdout_chars >= 0 else 0,
        "outputs": images,
    }
    if reply.get("session_lost") is True:
        clean["session_lost"] = True
    return clean, kept


def _refusal(
    data: bytes, budget: int, limits: dict[str, Any], pixels: Callable[[bytes], int | None] | None
) -> str | None:
    if len(data) > int(limits["file_bytes"]):
        return f"{len(data)} bytes exceeds the {limits['file_bytes']}-byte file limit"
    if len(data) > budget:
        return f"the call's images exceed the {limits['max_output_bytes']}-byte total"
    if pixels is None:
        return None
    n = pixels(data)
    if n is None:
        return "not a readable image"
    if n > int(limits["max_image_pixels"]):
        return f"{n} pixels exceeds the {limits['max_image_pixels']}-pixel limit"
    return None
