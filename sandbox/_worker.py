"""Entry point of one pooled worker process: ``python -m sandbox._worker '<config json>'``.

Import order is the point of this module: the heavy libraries (numpy, PIL with all its plugins,
OpenCV, matplotlib on Agg) load first, as root and with the host's view, so that no call pays
for them; only then does the worker confine itself and split into the template that forks one
child per call (``sandbox._forkserver``) and the manager that serves the pool (``sandbox._zygote``).
"""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path
from typing import Any


def _preload() -> None:
    import cv2
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from PIL import Image, ImageDraw, ImageEnhance, ImageFilter, ImageOps  # noqa: F401

    cv2.setNumThreads(1)
    Image.init()
    fig = plt.figure(figsize=(1, 1))
    plt.plot([0, 1])
    fig.savefig(os.devnull, format="png")
    plt.close("all")
    np.zeros((2, 2)).sum()
    # Every forked child clears matplotlib's font cache (an at-fork hook), freeing the fonts the
    # plot above loaded: ~120 copy-on-write page faults per call child. Cleared once here instead.
    clear = getattr(getattr(matplotlib.font_manager, "_get_font", None), "cache_clear", None)
    if clear is not None:
        clear()


_MADV_HUGEPAGE = 14
_MADV_COLLAPSE = 25
_HUGE = 2 << 20


def _pack_memory() -> None:
    """Back the template's heap with 2 MiB pages of its own, so each fork copies a few hundred
    page-table entries instead of ~14,000, and each call child's exit frees as few.

    The template was itself forked (by the namespace shim, which keeps the original pages), so its
    heap is mapped page by page wherever it has written since; ``MADV_COLLAPSE`` (Linux 6.1+)
    gives it fresh huge pages. The template writes only a few pages per fork afterwards, so most
    stay huge. Best effort: older kernels refuse, and nothing else changes.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    with open("/proc/self/maps") as f:
        maps = f.read().splitlines()
    for line in maps:
        fields = line.split()
        if fields[1] != "rw-p" or (len(fields) > 5 and fields[5] != "[heap]"):
            continue  # only private anonymous memory (the heap and glibc's mmapped chunks)
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        start, end = -(-lo // _HUGE) * _HUGE, hi // _HUGE * _HUGE
        if end > start:
            libc.madvise(start, end - start, _MADV_HUGEPAGE)
            libc.madvise(start, end - start, _MADV_COLLAPSE)


def main() -> None:
    # The pipes move to private fds so nothing printed on fd 1 can corrupt the protocol.
    req_fd, resp_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)

    from sandbox import _jail
    from sandbox._protocol import write_frame

    config: dict[str, Any] = json.loads(sys.argv[1])
    jailed = config["isolation"] == "jail"
    try:
        _preload()
        from sandbox._namespaces import reference_namespace
        from sandbox._zygote import Zygote

        # Looks up the interpreter tool's optional packages once, here, not in every call child.
        reference_namespace("interpreter", Path(os.devnull))

        from sandbox._ledger import DiskLedger

        # Opened before the jail hides the pool's folder; the calls' children close it.
        ledger = DiskLedger(os.open(config["ledger"], os.O_RDWR | os.O_CLOEXEC), int(config["ledger_slot"]),
                            int(config["limits"]["pool_disk_bytes"])) if config.get("ledger") else None
        if jailed:
            _jail.apply_limits(config["limits"])
            _jail.enter_namespaces()  # from here on we are PID 1 of a fresh PID namespace
            _jail.enter_jail(config["host_dir"], config["mount_point"])
            home = _jail.JAIL_HOME
        else:
            home = config["host_dir"]
            os.chdir(home)
            _jail.apply_limits(config["limits"])
            _jail.harden_zygote()
        zygote = Zygote(req_fd, resp_fd, home, config["limits"], jailed, int(config["uid"]), ledger)
        # Everything imported so far lives as long as the zygote: frozen, a child's garbage
        # collection never walks (and so never copies) those pages.
        gc.freeze()
        _pack_memory()
    except BaseException as exc:  # report why, so the pool can fall back or say so
        write_frame(resp_fd, {"op": "fatal", "error": f"{type(exc).__name__}: {exc}"[:2000]})
        return
    write_frame(resp_fd, {"op": "ready", "home": home})
    zygote.start()


if __name__ == "__main__":
    main()
