"""What a locally served model is: the ``serve:`` block of a model entry, and its command line.

The default command is ``vllm serve``; any OpenAI-compatible server (SGLang, our sim) fits
through ``command``, a list template with ``{model} {port} {host} {served_model_name}
{tensor_parallel_size} {replica}`` placeholders.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any

from fasteval.core.options import Opt

SERVE_OPTIONS: dict[str, Opt] = {
    "model": Opt("str", "checkpoint folder or hub id (vllm serve MODEL)", required=True),
    "tensor_parallel_size": Opt("int", "GPUs per replica"),
    "replicas": Opt("int", "data-parallel server processes, each on its own GPUs"),
    "max_model_len": Opt("int"), "gpu_memory_utilization": Opt("float"),
    "args": Opt("str_list", "extra server arguments, appended last"),
    "env": Opt("dict", "extra environment for the server", values=Opt("any")),
    "lora_modules": Opt("dict", "LoRA adapter name -> path", values=Opt("str")),
    "startup_timeout_s": Opt("float", "ready within this or the start fails"),
    "max_restarts": Opt("int", "restarts per replica after a death or hang"),
    "command": Opt("str_list", "template replacing `vllm serve`: {model} {port} {host} {served_model_name} "
                   "{tensor_parallel_size} {replica} {python}"),
    "admission": Opt("str", "kv: each replica's window follows its /metrics", choices=("kv",)),
    "routing": Opt("str", "how requests pick a replica", choices=("sticky", "least_loaded", "round_robin")),
    "health_interval_s": Opt("float"), "restart_backoff_s": Opt("float"), "stop_timeout_s": Opt("float"),
    "allowed_local_media_path": Opt("str", "passed as --allowed-local-media-path"),
}
"""The ``serve:`` block of a model or role entry (checked by the strict config validator)."""
SERVE_KEYS = frozenset(SERVE_OPTIONS)


class ServeConfigError(ValueError):
    pass


@dataclass(slots=True)
class ServeSpec:
    """One served model: how to start it, how many copies, and how hard to keep it up."""

    name: str
    """The served model name (the config entry's name): requests say ``"model": name``."""
    model: str
    tensor_parallel_size: int = 1
    replicas: int = 1
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    lora_modules: dict[str, str] = field(default_factory=dict)
    startup_timeout_s: float = 900.0
    max_restarts: int = 3
    command: list[str] | None = None
    admission: str | None = None
    """``kv``: size each replica's window from its /metrics (KV usage, waiting requests)."""
    routing: str = "sticky"
    """``sticky`` (sticky-least-loaded), ``least_loaded`` or ``round_robin``."""
    health_interval_s: float = 2.0
    restart_backoff_s: float = 1.0
    stop_timeout_s: float = 20.0
    allowed_local_media_path: str | None = None

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel_size

    @property
    def gpus_needed(self) -> int:
        return self.tensor_parallel_size * self.replicas

    @classmethod
    def from_config(cls, name: str, serve: dict[str, Any]) -> ServeSpec:
        if not isinstance(serve, dict):
            raise ServeConfigError(f"model {name}: 'serve' must be a mapping")
        unknown = sorted(set(serve) - SERVE_KEYS)
        if unknown:
            raise ServeConfigError(f"model {name}: unknown serve field(s) {unknown} (known: {sorted(SERVE_KEYS)})")
        if not serve.get("model"):
            raise ServeConfigError(f"model {name}: serve.model (a local path or hub id) is required")
        spec = cls(name=name, **{k: v for k, v in serve.items()})
        spec.args = [str(x) for x in spec.args or []]
        spec.env = {str(k): str(v) for k, v in (spec.env or {}).items()}
        if spec.command is not None and (not isinstance(spec.command, list) or not spec.command):
            raise ServeConfigError(f"model {name}: serve.command must be a non-empty list")
        if spec.tensor_parallel_size < 1 or spec.replicas < 1:
            raise ServeConfigError(f"model {name}: tensor_parallel_size and replicas must be >= 1")
        if spec.admission not in (None, "kv"):
            raise ServeConfigError(f"model {name}: serve.admission must be 'kv' or absent")
        if spec.routing not in ("sticky", "least_loaded", "round_robin"):
            raise ServeConfigError(f"model {name}: serve.routing must be sticky, least_loaded or round_robin")
        return spec

    def command_line(self, *, port: int, host: str, replica: int) -> list[str]:
        """The argv for one replica: the template filled in, or the default ``vllm serve``."""
        values = {"model": self.model, "port": port, "host": host, "served_model_name": self.name,
                  "tensor_parallel_size": self.tensor_parallel_size, "replica": replica, "python": sys.executable}
        if self.command is not None:
            try:
                return [str(part).format(**values) for part in self.command]
            except (KeyError, IndexError) as e:
                raise ServeConfigError(f"model {self.name}: serve.command has an unknown placeholder {e}") from None
        cmd = ["vllm", "serve", self.model, "--host", host, "--port", str(port), "--served-model-name", self.name,
               "--tensor-parallel-size", str(self.tensor_parallel_size)]
        if self.max_model_len:
            cmd += ["--max-model-len", str(self.max_model_len)]
        if self.gpu_memory_utilization:
            cmd += ["--gpu-memory-utilization", str(self.gpu_memory_utilization)]
        if self.lora_modules:
            cmd += ["--enable-lora", "--lora-modules", *(f"{k}={v}" for k, v in self.lora_modules.items())]
        if self.allowed_local_media_path:
            cmd += ["--allowed-local-media-path", self.allowed_local_media_path]
        return cmd + self.args


_HINTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"CUDA out of memory|OutOfMemoryError|No available memory for the cache blocks", re.I),
     "CUDA OOM: lower serve.gpu_memory_utilization or serve.max_model_len, or raise tensor_parallel_size"),
    (re.compile(r"address already in use|Errno 98", re.I),
     "port in use: another process holds the port (fasteval picks a free one unless serve.command fixes it)"),
    (re.compile(r"tool[-_ ]call[-_ ]parser|tool parser", re.I),
     "unknown tool parser: check --tool-call-parser in serve.args against `vllm serve --help`"),
    (re.compile(r"Repository Not Found|does not appear to have a file|not a local folder"
                r"|Can't load the configuration|is not a valid model identifier", re.I),
     "model not found: serve.model must be a local checkpoint folder or a hub id already in the local cache"),
    (re.compile(r"server binary not found", re.I),
     "the server binary is missing: install vllm (pip install 'fasteval[vllm]') or set serve.command"),
]


def hints_for(log_tail: str) -> list[str]:
    """Known causes of a failed start, recognised from the server's own output."""
    return [hint for pattern, hint in _HINTS if pattern.search(log_tail)]
