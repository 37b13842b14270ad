"""Which GPUs a sweep may use, and who holds which: served models take whole GPUs.

``run.gpus: auto`` means CUDA_VISIBLE_DEVICES when set, else the GPUs nvidia-smi lists, else
none; a list names them. Each replica gets ``tensor_parallel_size`` GPUs of its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any


class GpuConfigError(ValueError):
    pass


def detect_gpus(setting: Any = "auto") -> list[str]:
    """The GPU ids (as CUDA_VISIBLE_DEVICES spells them) this sweep may hand to servers."""
    if isinstance(setting, list):
        return [str(g) for g in setting]
    if isinstance(setting, int) and not isinstance(setting, bool):
        return [str(i) for i in range(setting)]
    if setting not in (None, "auto"):
        raise GpuConfigError(f"run.gpus must be 'auto', a count or a list of GPU ids (got {setting!r})")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() not in ("", "-1"):
        return [g.strip() for g in visible.split(",") if g.strip()]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


class GpuPool:
    """Free GPUs; a served model takes its share whole or waits."""

    def __init__(self, gpus: list[str]) -> None:
        self.all = list(gpus)
        self.free = list(gpus)

    def take(self, n: int) -> list[str] | None:
        if n > len(self.free):
            return None
        taken, self.free = self.free[:n], self.free[n:]
        return taken

    def give(self, gpus: list[str]) -> None:
        self.free.extend(g for g in gpus if g not in self.free)
        self.free.sort(key=lambda g: self.all.index(g) if g in self.all else len(self.all))
