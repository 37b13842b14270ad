"""Which GPUs (or, on a CPU node, which cores) a sweep may use, and who holds which.

``run.gpus: auto`` (the default) means CUDA_VISIBLE_DEVICES when set, else the GPUs nvidia-smi
lists, else none; a list names them; ``none`` (or 0) means none. Each replica gets
``tensor_parallel_size`` GPUs of its own. With no GPU the node is a CPU node: served models run
vLLM's CPU build and each replica gets cores of its own instead (``serve.cpus``, default the
usable cores split evenly), bound through ``VLLM_CPU_OMP_THREADS_BIND``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

from fasteval.core.errors import ConfigError


class GpuConfigError(ConfigError):
    """GPU placement the node cannot give (``run.gpus``, a model's GPU count): a config error, exit 2."""


def detect_gpus(setting: Any = "auto") -> list[str]:
    """The GPU ids (as CUDA_VISIBLE_DEVICES spells them) this sweep may hand to servers."""
    if isinstance(setting, list):
        return [str(g) for g in setting]
    if isinstance(setting, int) and not isinstance(setting, bool):
        return [str(i) for i in range(setting)]
    if setting == "none":
        return []
    if setting not in (None, "auto"):
        raise GpuConfigError(f"run.gpus must be 'auto', 'none', a count or a list of GPU ids (got {setting!r})")
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


def detect_cpus() -> list[str]:
    """The cores this process may run on (its affinity mask), as strings like GPU ids."""
    try:
        cores = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = list(range(os.cpu_count() or 1))
    return [str(c) for c in cores]


def usable_cpus(cores: list[str]) -> list[str]:
    """The cores servers may take: all of them, less the first (for fasteval) when there are more than two."""
    return cores[1:] if len(cores) > 2 else list(cores)


def cpu_bind(cores: list[str], tensor_parallel_size: int = 1) -> str:
    """``VLLM_CPU_OMP_THREADS_BIND`` for one replica: its cores, split in ``|`` groups per TP rank."""
    n = max(1, len(cores) // max(1, tensor_parallel_size))
    groups = [cores[i * n:(i + 1) * n] for i in range(max(1, tensor_parallel_size))]
    return "|".join(",".join(g) for g in groups if g)
