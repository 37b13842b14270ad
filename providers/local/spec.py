"""What a locally served model is: the ``serve:`` block of a model entry, and its command line.

The default command is ``vllm serve`` (the ``vllm`` on PATH, else the project's ``.venv-vllm``);
any OpenAI-compatible server (SGLang, our sim) fits through ``command``, a list template with
``{model} {port} {host} {served_model_name} {tensor_parallel_size} {replica} {cpus} {gpus}
{python} {lora_modules}`` placeholders (``{lora_modules}``: ``name=path,...``); a one-element ``command`` names the vllm binary and keeps the default
arguments. ``env`` values take the same placeholders, per replica.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fasteval.core.errors import ConfigError
from fasteval.core.options import Opt

SERVE_OPTIONS: dict[str, Opt] = {
    # A served checkpoint is identified by its fingerprint, not its path (shapes=False on model);
    # how many servers and how they are kept up shape no result.
    "model": Opt("str", "checkpoint folder or hub id (vllm serve MODEL)", required=True, shapes=False),
    "tensor_parallel_size": Opt("int", "GPUs per replica", shapes=False),
    "replicas": Opt("int", "data-parallel server processes, each on its own GPUs", shapes=False),
    "max_model_len": Opt("int"), "gpu_memory_utilization": Opt("float", shapes=False),
    "args": Opt("str_list", "extra server arguments, appended last"),
    "env": Opt("dict", "extra environment for the server", values=Opt("any")),
    "lora_modules": Opt("dict", "LoRA adapter name -> path", values=Opt("str")),
    "startup_timeout_s": Opt("float", "ready within this or the start fails", shapes=False),
    "max_restarts": Opt("int", "restarts per replica after a death or hang", shapes=False),
    "command": Opt("str_list", "template replacing `vllm serve`: {model} {port} {host} {served_model_name} "
                   "{tensor_parallel_size} {replica} {cpus} {gpus} {python}; one element: the vllm binary"),
    "cpus": Opt("int", "cores per replica on a CPU node (default: the node's cores split evenly)", shapes=False),
    "kv_cache_gib": Opt("int", "KV cache GiB per replica on a CPU node (VLLM_CPU_KVCACHE_SPACE, whole GiB)",
                        shapes=False),
    "prompt_tokens_details": Opt("bool", "start vLLM with --enable-prompt-tokens-details (default true): "
                                 "records carry each request's cached prompt tokens", shapes=False),
    "admission": Opt("str", "kv: each replica's window follows its /metrics", choices=("kv",), shapes=False),
    "routing": Opt("str", "how requests pick a replica", choices=("sticky", "least_loaded", "round_robin"),
                   shapes=False),
    "health_interval_s": Opt("float", shapes=False), "restart_backoff_s": Opt("float", shapes=False),
    "stop_timeout_s": Opt("float", shapes=False),
    "allowed_local_media_path": Opt("str", "passed as --allowed-local-media-path", shapes=False),
    "api_server_count": Opt("int", "vLLM API server processes per replica (--api-server-count): image "
                            "preprocessing runs there, so more of them lift an image-heavy ceiling", shapes=False),
}
"""The ``serve:`` block of a model or role entry (checked by the strict config validator)."""
SERVE_KEYS = frozenset(SERVE_OPTIONS)


class ServeConfigError(ConfigError):
    """A ``serve:`` entry that cannot start (a user's config, exit 2; still a ValueError)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        """The ``serve`` field at fault, when one is (the config check points at its line)."""


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
    api_server_count: int | None = None
    """vLLM's ``--api-server-count``: front-end processes (HTTP, tokenizing, image preprocessing)."""
    cpus: int | None = None
    """Cores per replica on a CPU node; None: the node's usable cores split evenly."""
    kv_cache_gib: int | None = None
    prompt_tokens_details: bool = True
    binary: str | None = None
    """The vllm executable named by a one-element ``command`` (else found by ``find_vllm``)."""
    images_per_prompt: int | None = None
    """vLLM's ``--limit-mm-per-prompt`` image count, read from ``args`` (None: not set there)."""

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
        if spec.command is not None and len(spec.command) == 1 and "{" not in str(spec.command[0]):
            spec.binary, spec.command = str(spec.command[0]), None  # names the vllm binary only
        if spec.cpus is not None and (isinstance(spec.cpus, bool) or not isinstance(spec.cpus, int) or spec.cpus < 1):
            raise ServeConfigError(f"model {name}: serve.cpus must be a whole number of cores >= 1")
        if spec.kv_cache_gib is not None and (isinstance(spec.kv_cache_gib, bool)
                                              or not isinstance(spec.kv_cache_gib, int) or spec.kv_cache_gib < 1):
            raise ServeConfigError(f"model {name}: serve.kv_cache_gib must be a whole number of GiB >= 1 "
                                   f"(vLLM's CPU build takes whole GiB)")
        if spec.tensor_parallel_size < 1 or spec.replicas < 1:
            raise ServeConfigError(f"model {name}: tensor_parallel_size and replicas must be >= 1")
        if spec.admission not in (None, "kv"):
            raise ServeConfigError(f"model {name}: serve.admission must be 'kv' or absent")
        if spec.routing not in ("sticky", "least_loaded", "round_robin"):
            raise ServeConfigError(f"model {name}: serve.routing must be sticky, least_loaded or round_robin")
        check_api_servers(name, spec.api_server_count, spec.args)
        spec.images_per_prompt = image_limit(name, spec.args)
        return spec

    def placeholders(self, *, port: int, host: str, replica: int, cpus: list[str] | None = None,
                     gpus: list[str] | None = None) -> dict[str, Any]:
        return {"model": self.model, "port": port, "host": host, "served_model_name": self.name,
                "lora_modules": ",".join(f"{k}={v}" for k, v in self.lora_modules.items()),
                "tensor_parallel_size": self.tensor_parallel_size, "replica": replica, "python": sys.executable,
                "cpus": ",".join(cpus or []), "gpus": ",".join(gpus or [])}

    def _fill(self, what: str, template: str, values: dict[str, Any]) -> str:
        try:
            return template.format(**values)
        except (KeyError, IndexError, ValueError) as e:
            raise ServeConfigError(f"model {self.name}: {what} has an unknown placeholder {e} "
                                   f"(known: {', '.join(sorted(values))})") from None

    def replica_env(self, values: dict[str, Any]) -> dict[str, str]:
        """``serve.env`` with this replica's placeholders filled in."""
        return {k: self._fill(f"serve.env.{k}", v, values) for k, v in self.env.items()}

    def vllm_binary(self) -> str | None:
        """The vllm executable the default command runs: serve.command's, PATH's, or .venv-vllm's."""
        return self.binary if self.binary is not None else find_vllm()

    def command_line(self, *, port: int, host: str, replica: int, cpus: list[str] | None = None,
                     gpus: list[str] | None = None) -> list[str]:
        """The argv for one replica: the template filled in, or the default ``vllm serve``."""
        values = self.placeholders(port=port, host=host, replica=replica, cpus=cpus, gpus=gpus)
        if self.command is not None:
            return [self._fill("serve.command", str(part), values) for part in self.command]
        # ``--opt=value``: a name starting with '-' would otherwise read as an option of its own
        cmd = [self.vllm_binary() or "vllm", "serve", self.model, "--host", host, "--port", str(port),
               f"--served-model-name={self.name}", "--tensor-parallel-size", str(self.tensor_parallel_size)]
        if self.prompt_tokens_details:
            cmd.append("--enable-prompt-tokens-details")  # cached tokens per request, in the records
        if self.max_model_len:
            cmd += ["--max-model-len", str(self.max_model_len)]
        if self.gpu_memory_utilization:
            cmd += ["--gpu-memory-utilization", str(self.gpu_memory_utilization)]
        if self.lora_modules:
            cmd += ["--enable-lora", "--lora-modules", *(lora_module_item(k, v) for k, v in self.lora_modules.items())]
        if self.allowed_local_media_path:
            cmd += ["--allowed-local-media-path", self.allowed_local_media_path]
        if self.api_server_count is not None:
            cmd += ["--api-server-count", str(self.api_server_count)]
        return cmd + self.args


def lora_module_item(name: str, path: str) -> str:
    """One ``--lora-modules`` item that vLLM reads back as exactly this name and path.

    vLLM takes ``name=path`` only when the item holds an '=' and no ',' (and then splits it at
    every '='); anything else it reads as JSON. A folder like ``/ckpts/lr=1e-4,bs=32/checkpoint-100``
    (Hydra's naming) would crash its parser or name another adapter, and an item starting with '-'
    would end the option's list: those go in the JSON form, which says each field outright.
    """
    if "=" in name or "=" in path or "," in name or "," in path or name.startswith(("-", "{")):
        return json.dumps({"name": name, "path": path})
    return f"{name}={path}"


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
    (re.compile(r"server binary not found", re.I), "the server binary is missing: check serve.command"),
    (re.compile(r"Failed to infer device type", re.I),
     "vLLM found no device: on a CPU node its `vllm` distribution must carry a +cpu version (`make vllm`)"),
    (re.compile(r"CPU Generator does not use offset", re.I),
     "vLLM's CPU build crashes on a seeded sampled request whose prompt is prefilled in chunks: "
     "set capabilities: {seed: false}, or temperature 0, for this model"),
]
_ECHO_LINES = ("launcher: pid", "=== fasteval:")
"""Our own lines that echo the command line (whose arguments must not match a hint)."""


API_SERVER_FLAGS = ("--api-server-count", "-asc")
"""vLLM 0.32's spellings of the flag (``vllm serve --help=all``)."""


def check_api_servers(name: str, count: Any, args: list[str]) -> None:
    """``serve.api_server_count``: a whole number >= 1 (0 is vLLM's headless mode, with no HTTP server
    to send to), not said a second time in ``serve.args`` (vLLM would take the last one silently, so
    one of the two settings would be a lie), and not beside ``--headless`` (vLLM refuses the pair)."""
    if count is None:
        return
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ServeConfigError(f"model {name}: serve.api_server_count must be a whole number of processes >= 1, "
                               f"got {count!r}", key="api_server_count")
    given = [a for a in args if a in API_SERVER_FLAGS or a.startswith(tuple(f + "=" for f in API_SERVER_FLAGS))]
    if given:
        raise ServeConfigError(f"model {name}: serve.api_server_count is set and serve.args passes {given[0]!r} too: "
                               "keep one of them (serve.api_server_count is the typed one)", key="api_server_count")
    if "--headless" in args:
        raise ServeConfigError(f"model {name}: serve.api_server_count cannot go with --headless in serve.args "
                               "(vLLM starts no API server then, and fasteval needs one)", key="api_server_count")


def image_limit(name: str, args: list[str]) -> int | None:
    """The image count of ``--limit-mm-per-prompt`` in a server's arguments (its last occurrence,
    as vLLM's parser takes it): ``'{"image": 4}'`` or ``'{"image": {"count": 4, ...}}'``."""
    value: str | None = None
    for i, arg in enumerate(args):
        if arg == "--limit-mm-per-prompt" and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--limit-mm-per-prompt="):
            value = arg.split("=", 1)[1]
    if value is None:
        return None
    try:
        limits = json.loads(value)
    except ValueError:
        limits = None
    if not isinstance(limits, dict):
        raise ServeConfigError(f"model {name}: --limit-mm-per-prompt in serve.args must be a JSON object such as "
                               f"'{{\"image\": 4}}', got {value[:100]!r}")
    image = limits.get("image")
    count = image.get("count") if isinstance(image, dict) else image
    if count is None:
        return None
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ServeConfigError(f"model {name}: --limit-mm-per-prompt's image count must be a whole number >= 0, "
                               f"got {count!r}")
    return count


def hints_for(log_tail: str) -> list[str]:
    """Known causes of a failed start, recognised from the server's own output (not our echo of it)."""
    theirs = "\n".join(line for line in log_tail.splitlines() if not line.lstrip().startswith(_ECHO_LINES))
    return [hint for pattern, hint in _HINTS if pattern.search(theirs)]


PROJECT_ROOT = Path(__file__).resolve().parents[2]
VLLM_VENV = ".venv-vllm"


def cache_root() -> Path:
    """fasteval's folder for what served models reuse across runs (vLLM's and torch's compile caches)."""
    return Path(os.environ.get("FASTEVAL_CACHE") or Path.home() / ".cache" / "fasteval")


def find_vllm() -> str | None:
    """``vllm`` on PATH, else the project's ``.venv-vllm/bin/vllm`` (``make vllm``), else None."""
    found = shutil.which("vllm")
    if found:
        return found
    for root in (PROJECT_ROOT, Path.cwd()):
        candidate = root / VLLM_VENV / "bin" / "vllm"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def missing_vllm_message(name: str, *, cpu_node: bool) -> str:
    """What to do when no vllm binary is found: the CPU build on a node without a GPU."""
    how = ("this node has no GPU: install vLLM's CPU build with `make vllm` in the fasteval checkout "
           f"(it goes to {VLLM_VENV}/, found there without PATH)" if cpu_node
           else "install vLLM (pip install vllm) in this or another venv and put its bin/ on PATH")
    return (f"model {name}: the vllm binary was not found (not on PATH, no {VLLM_VENV}/bin/vllm): {how}, "
            f"or name the binary in serve.command")
