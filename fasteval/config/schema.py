"""Strict config validation: every key declared, every name known, every data path present.

A sweep runs unattended, so whatever can be known to be wrong is reported before it starts:
all problems at once, each as ``file:line: key.path: message; did you mean 'x'?``. The
declarations live with the components (``Suite.options_schema``, ``Tool.option_schema``,
a provider's kind in ``providers.registry``...); the shapes shared by every config (endpoints, settings, run options)
live here. ``config_json_schema()`` turns the same declarations into a JSON Schema.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from fasteval.config.log_to import LOG_TO_OPTIONS
from fasteval.config.notify import NOTIFY_OPTIONS
from fasteval.core.options import Opt, OptionSchema, json_schema, object_schema
from fasteval.core.yaml_bounds import node_lines
from providers import providers
from sandbox import SandboxLimits


def sandbox_limit_options() -> dict[str, Opt]:
    """``run.sandbox.limits``: every field of SandboxLimits, typed as it is declared there."""
    return {f.name: Opt("float" if f.type == "float" else "int", "positive; default " + str(f.default))
            for f in dataclasses.fields(SandboxLimits)}

KeyPath = tuple[str | int, ...]

_LIMITS = {"concurrency": Opt("int", "requests in flight to this endpoint (AIMD may shrink it on 429s)"),
           "rpm": Opt("float", "requests per minute"), "tpm": Opt("float", "tokens per minute"),
           "max_body_mb": Opt("float", "request-body megabytes in flight before requests wait (default 1024)")}
_TIMEOUTS = {"connect_s": Opt("float", "connecting"), "read_s": Opt("float", "waiting for bytes"),
             "attempt_s": Opt("float", "one whole attempt")}
_RETRY = {"max_attempts": Opt("int", "attempts per request, the first included"),
          "total_budget_s": Opt("float", "give up on a request after this long"),
          "base_delay_s": Opt("float", "first backoff"), "max_delay_s": Opt("float", "backoff cap")}

ENDPOINT_COMMON: dict[str, Opt] = {
    "name": Opt("str", "the model's name in records and reports", shapes=False),
    "provider": Opt("str", "who serves the model (fasteval list providers)", required=True),
    "model": Opt("str", "the model id the server serves (default: name)"),
    "params": Opt("dict", "sampling parameters merged into every request (temperature, max_tokens...)"),
    "limits": Opt("dict", "per-endpoint limits", fields=_LIMITS, shapes=False),
    "timeouts": Opt("dict", "per-attempt timeouts", fields=_TIMEOUTS, shapes=False),
    "retry": Opt("dict", "retry policy", fields=_RETRY, shapes=False),
    "tool_message_images": Opt("bool", "a tool message may carry images (else they follow in a user message)"),
    "endpoint_id": Opt("str", "stable identity for caches and limiters", shapes=False),
    "max_image_bytes": Opt("int", "downsize images above this many encoded bytes"),
    "max_image_pixels": Opt("int", "downsize images above this many pixels"),
    "local_media": Opt("bool", "send file:// URLs of the run's blob store (server reads local media)", shapes=False),
    "image_resize": Opt("any", "the model processor's resize: auto (a served checkpoint's own), qwen2_5_vl or {processor, max_pixels}"),
    "price": Opt("dict", "USD per million tokens, overriding fasteval.core.pricing's table", fields={
        "input": Opt("float", required=True), "output": Opt("float", required=True), "cache_read": Opt("float"),
        "cache_write": Opt("float"), "batch": Opt("float", "the share paid in batch mode (default: the provider's, 0.5)")},
        shapes=False),
    "batch": Opt("any", "provider batch API at half price: true or {max_requests, max_mb, gather_s, poll_s, window, "
                 "max_resubmissions, fallback: batch|interactive} (docs/providers.md, batch mode)", shapes=False),
    "capabilities": Opt("dict", "override what the provider is assumed to support", fields={
        "tool_result_images": Opt("bool"), "parallel_tool_calls": Opt("bool"), "seed": Opt("bool"),
        "thinking": Opt("bool"), "sampling": Opt("bool"),
        "max_images": Opt("int", "the most images one request may carry (vLLM's --limit-mm-per-prompt)")}),
}


SETTING_FIELDS: dict[str, Opt] = {
    "name": Opt("str", "the setting's name in records and reports", required=True),
    "extends": Opt("str", "a default setting of the suite this one starts from"),
    "tools": Opt("str_list", "tool names offered (default: the suite's)"),
    "max_rounds": Opt("int", "model turns per user turn"),
    "fidelity": Opt("str", "reference (reproduce the harness) or fixed", choices=("reference", "fixed")),
    "tool_protocol": Opt("str", "native tool_calls or <tool_call> text", choices=("native", "text")),
    "options": Opt("dict", "suite-specific setting options"),
}

SETTING_COMMON_OPTIONS: dict[str, Opt] = {
    "image_profile": Opt("str", "how images are encoded for the wire (original, jpeg85, png_smart...)"),
    "tool_options": Opt("dict", "options per tool name", values=Opt("dict")),
}

BREAKER_OPTIONS: dict[str, Opt] = {
    "failures": Opt("int", "consecutive connection/auth failures that open an endpoint's breaker (default 5)"),
    "outage_budget_s": Opt("float", "how long an endpoint may stay down before the sweep stops it (default 1800)"),
    "probe_initial_s": Opt("float", "first wait before probing a down endpoint (default 1)"),
    "probe_max_s": Opt("float", "longest wait between probes (default 60)"),
}

RUN_OPTIONS: dict[str, Opt] = {
    "max_concurrency": Opt("int", "jobs in flight in the whole sweep"),
    "fsync": Opt("str", "when records.jsonl is synced to disk", choices=("always", "batch", "never")),
    "progress": Opt("bool", "live panel (default: when stderr is a terminal)"),
    "keep_errors": Opt("bool", "do not rerun jobs that ended in error"),
    "sandbox": Opt("dict", "the Python sandbox pool", fields={
        "workers": Opt("int", "warm worker processes"),
        "isolation": Opt("str", "auto, namespaces or process", choices=("auto", "namespaces", "process")),
        "limits": Opt("dict", "per-call and per-trajectory limits of model code (docs/sandbox.md)",
                      fields=sandbox_limit_options())}),
    "cache": Opt("dict", "the content-addressed cache", fields={
        "path": Opt("path", "SQLite file (default $FASTEVAL_CACHE_DIR or ~/.cache/fasteval)"),
        "modes": Opt("any", "per-namespace modes, e.g. 'search=replay,judge=use,model=off'")}),
    "http": Opt("dict", "the shared HTTP session of retrieval tools", fields={
        "connections": Opt("int"), "user_agent": Opt("str")}),
    "limits": Opt("dict", "sizes of named limiters (external-API tools)", values=Opt("int")),
    "breaker": Opt("dict", "per-endpoint circuit breaker", fields=BREAKER_OPTIONS),
    "browser": Opt("dict", "browser-rendered pages (VistaHop's reference; fasteval[browser])", fields={
        "executable_path": Opt("str", "the system Chromium"), "max_pages": Opt("int")}),
    "gpus": Opt("any", "GPUs for served models: auto (CUDA_VISIBLE_DEVICES, else nvidia-smi), a count or ids"),
}
"""Run options; a component that adds one registers it here with one line."""

TOP_LEVEL: dict[str, Opt] = {
    "name": Opt("str", "a label for the sweep"),
    "description": Opt("str"),
    "seeds": Opt("int_or_list", "a count (0..n-1) or the list of seeds"),
    "models": Opt("list", "evaluated models (entries or {include: file})", required=True),
    "roles": Opt("dict", "model roles: judge, extractor, summarizer..."),
    "suites": Opt("list", "suites with options and settings", required=True),
    "run": Opt("dict", "run options", fields=RUN_OPTIONS),
    "notify": Opt("dict", "a command and/or URL told when the sweep ends or goes wrong (docs/config.md)",
                  fields=NOTIFY_OPTIONS),
    "log_to": Opt("dict", "experiment trackers told each model × suite × setting's scores as it completes: mlflow, "
                  "wandb, tensorboard (docs/export.md)", fields=LOG_TO_OPTIONS),
    "published": Opt("list", "papers' numbers to show beside ours in the leaderboard: {suite, setting, model, match, "
                      "value (percent), paper, table, metric?, note?} (fasteval/suites/published.yaml has ours)"),
    "store": Opt("path", "a results store shared across runs (a folder; default $FASTEVAL_STORE): every finished "
                 "record also goes there, and a job whose fingerprint has an ok record there is copied, not run "
                 "(docs/run-folder.md)", shapes=False),
    "prices": Opt("dict", "USD per million tokens by model name or id ({input, output, cache_read, cache_write}); "
                  "batch_factor: {provider: share paid in batch mode} (default 0.5)"),
}


@dataclass(slots=True)
class Source:
    """Where a piece of config came from: its file and the line of every key path in it."""

    file: Path
    lines: dict[KeyPath, int] = field(default_factory=dict)
    prefix: KeyPath = ()
    """The key path of this source's root inside the sweep (an included model list: ``models``)."""

    def line(self, path: KeyPath) -> int | None:
        rel = path[len(self.prefix):] if path[:len(self.prefix)] == self.prefix else path
        while rel:
            if rel in self.lines:
                return self.lines[rel]
            rel = rel[:-1]
        return self.lines.get((), None)


def line_map(text: str) -> dict[KeyPath, int]:
    """The 1-based line of every mapping key and list item of a YAML document (aliases walked once)."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return {}
    return node_lines(root)


def fmt_path(path: KeyPath) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out or "(top level)"


def did_you_mean(word: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


class Problems:
    """Every problem found, so the user fixes them all in one go."""

    def __init__(self, *, check_paths: bool = True) -> None:
        self.items: list[str] = []
        self.check_paths = check_paths
        """Whether declared data paths must exist (off for tools that only inspect a config)."""

    def add(self, src: Source, path: KeyPath, message: str) -> None:
        line = src.line(path)
        where = f"{src.file}:{line}" if line is not None else f"{src.file}"
        self.items.append(f"{where}: {fmt_path(path)}: {message}")

    def __bool__(self) -> bool:
        return bool(self.items)

    def in_file_order(self) -> list[str]:
        """The problems as the file reads, top to bottom (checks run by topic, not by line); files in
        the order they were first named, a problem without a line first in its file."""
        files: dict[str, int] = {}

        def key(item: str) -> tuple[int, int]:
            m = _WHERE.match(item)
            file, line = (m.group(1), int(m.group(2))) if m else (item.split(": ", 1)[0], 0)
            return files.setdefault(file, len(files)), line

        return sorted(self.items, key=key)


_WHERE = re.compile(r"^(.+?):(\d+): ")


_PY_TYPES: dict[str, tuple[type, ...]] = {"str": (str,), "path": (str,), "int": (int,), "float": (int, float),
                                         "bool": (bool,), "list": (list,), "dict": (dict,)}


def check_value(value: Any, opt: Opt, path: KeyPath, src: Source, problems: Problems,
                base: Path | None = None) -> Any:
    """Check one value against its declaration; returns it with ``path`` options resolved against ``base``."""
    t = opt.type
    if value is None and not opt.required:
        return value
    if t in _PY_TYPES:
        ok = isinstance(value, _PY_TYPES[t]) and not (t in ("int", "float") and isinstance(value, bool))
        if not ok:
            problems.add(src, path, f"expected {'a number' if t == 'float' else 'a ' + t}, got {value!r}")
            return value
    elif t == "str_list":
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            problems.add(src, path, f"expected a list of names, got {value!r}")
            return value
    elif t == "int_or_list":
        if isinstance(value, bool) or not (isinstance(value, int) and value >= 1 or isinstance(value, list)
                                           and value and all(isinstance(x, int) for x in value)):
            problems.add(src, path, f"expected a positive count or a list of integers, got {value!r}")
            return value
    if opt.choices is not None and value not in opt.choices:
        problems.add(src, path, f"{value!r} is not one of {', '.join(map(str, opt.choices))}"
                     + did_you_mean(str(value), map(str, opt.choices)))
    if t == "dict" and opt.fields is not None:
        return check_mapping(value, opt.fields, path, src, problems, base)
    if t == "dict" and opt.values is not None:
        return {k: check_value(v, opt.values, (*path, k), src, problems, base) for k, v in value.items()}
    if t == "path" and base is not None:
        resolved = Path(value).expanduser()
        resolved = resolved if resolved.is_absolute() else Path(os.path.normpath(base / resolved))
        if opt.exists and problems.check_paths and not resolved.exists():
            hint = _fetch_hint(opt.fetch, resolved) if opt.fetch else ""
            problems.add(src, path, f"{value} does not exist (looked for {resolved}; relative paths are "
                         f"read from the config file's folder){hint}")
        return str(resolved)
    return value


def _fetch_hint(name: str, resolved: Path) -> str:
    from fasteval.suites.data_fetch import default_dest

    folder = resolved.parent if resolved.suffix else resolved
    dest = "" if folder.resolve() == default_dest(name).resolve() else f" --dest {folder}"
    return f"; get it with `fasteval data fetch {name}{dest}`"


def check_mapping(value: Mapping[str, Any], schema: OptionSchema, path: KeyPath, src: Source, problems: Problems,
                  base: Path | None = None) -> dict[str, Any]:
    """Unknown keys are errors with a suggestion; declared ones are type-checked."""
    out: dict[str, Any] = {}
    for key, v in value.items():
        opt = schema.get(str(key))
        if opt is None:
            known = sorted(schema)
            problems.add(src, (*path, key), f"unknown key{did_you_mean(str(key), known)} "
                         f"(known: {', '.join(known)})")
            out[key] = v
            continue
        out[key] = check_value(v, opt, (*path, key), src, problems, base)
    for key, opt in schema.items():
        if opt.required and key not in value:
            problems.add(src, path, f"missing required key {key!r}")
    return out


def config_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a sweep config, from the same declarations the validator uses."""
    from fasteval.config.series import CHECKPOINT_OPTIONS
    from fasteval.suites.base import SUITES

    schemas = provider_schemas()

    def endpoint_schema(role: bool) -> dict[str, Any]:
        """Every provider's entry; a model (not a role) of a servable provider may be a series."""
        out: dict[str, Any] = {"oneOf": []}
        for name, opts in sorted(schemas.items()):
            kind = providers()[name]
            fields = {**dict(opts), "provider": Opt("str", choices=(name,), required=True)}
            if kind.servable and not role:
                fields["checkpoints"] = Opt("dict", "a training run's checkpoints, one model per step",
                                            fields=CHECKPOINT_OPTIONS)
            entry = {**object_schema(fields), "title": name}
            for key, values in (kind.choices() if kind.choices else {}).items():
                entry["properties"][key]["enum"] = values
            out["oneOf"].append(entry)
        return out

    endpoint = endpoint_schema(role=False)
    suites = []
    for name, cls in sorted(SUITES.items()):
        setting_opts = {**SETTING_COMMON_OPTIONS, **(getattr(cls, "setting_options", None) or {})}
        setting = object_schema({**SETTING_FIELDS, "options": Opt("dict", fields=setting_opts)})
        suites.append({"type": "object", "title": name, "additionalProperties": False, "required": ["name"],
                       "properties": {"name": {"const": name},
                                      "options": object_schema(getattr(cls, "options_schema", None)),
                                      "settings": {"type": "array", "items": setting}}})
    top = {k: json_schema(v) for k, v in TOP_LEVEL.items()}
    top["models"] = {"type": "array", "items": {"anyOf": [
        {"type": "object", "properties": {"include": {"type": "string"}}, "required": ["include"],
         "additionalProperties": False}, endpoint]}}
    top["roles"] = {"type": "object", "additionalProperties": endpoint_schema(role=True)}
    top["suites"] = {"type": "array", "items": {"oneOf": suites}}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "fasteval sweep config",
            "type": "object", "properties": top, "required": ["models", "suites"], "additionalProperties": False}


KNOWN_ROLES: set[str] = {"judge", "extractor", "summarizer"}
"""Model roles something reads (suites' judges, TIR-Bench's extractor, text_search's summarizer)."""

TOOL_COMMON_OPTIONS: dict[str, Opt] = {
    "fidelity": Opt("str", "reference or fixed, for this tool only", choices=("reference", "fixed")),
    "concurrency": Opt("int", "size of the tool's limiter"),
}


def provider_schemas() -> dict[str, OptionSchema]:
    """Each provider's entry keys: the common ones plus what its kind declares (providers.registry)."""
    return {name: {**ENDPOINT_COMMON, **kind.options()} for name, kind in providers().items()}


def check_endpoint(spec: Any, path: KeyPath, src: Source, problems: Problems, *, role: bool) -> None:
    """A model or role entry: a known provider, its declared options, a known sim policy."""
    if not isinstance(spec, dict):
        problems.add(src, path, f"expected a mapping, got {spec!r}")
        return
    schemas = provider_schemas()
    provider = spec.get("provider")
    if provider is None:
        problems.add(src, path, f"missing required key 'provider' (one of {', '.join(sorted(schemas))})")
        return
    if provider not in schemas:
        problems.add(src, (*path, "provider"), f"unknown provider {provider!r}{did_you_mean(str(provider), schemas)}"
                     f" (known: {', '.join(sorted(schemas))})")
        return
    schema = dict(schemas[provider])
    kind = providers()[provider]
    if kind.needs_base_url and not isinstance(spec.get("serve"), dict):  # a served model has no base_url to give
        schema["base_url"] = replace(schema["base_url"], required=True)
    if not role:
        schema["name"] = Opt("str", required=True)
        if kind.servable:
            from fasteval.config.series import CHECKPOINT_OPTIONS

            schema["checkpoints"] = Opt("dict", "a training run's checkpoints, one model per step (docs/serving.md)",
                                        fields=CHECKPOINT_OPTIONS)
    check_mapping(spec, schema, path, src, problems)
    if isinstance(spec.get("serve"), dict) and spec["serve"].get("command") is not None:
        check_serve_command(spec["serve"], str(spec.get("name") or path[-1]), (*path, "serve"), src, problems)
    if isinstance(spec.get("serve"), dict):
        _check_api_servers(spec["serve"], str(spec.get("name") or path[-1]), (*path, "serve"), src, problems)
    if kind.validate is not None:
        for key, message in kind.validate(spec):
            problems.add(src, (*path, key), message)
    _check_batch(spec, path, src, problems)
    _check_image_resize(spec, path, src, problems)


def _check_api_servers(serve: dict[str, Any], name: str, path: KeyPath, src: Source, problems: Problems) -> None:
    """``serve.api_server_count``: a count >= 1, not passed again in ``serve.args`` (its line, not a failed start)."""
    from providers import ServeConfigError, check_api_servers

    args = serve.get("args")
    try:
        check_api_servers(name, serve.get("api_server_count"), [str(a) for a in args] if isinstance(args, list) else [])
    except ServeConfigError as e:
        problems.add(src, (*path, e.key or "api_server_count"), str(e).removeprefix(f"model {name}: "))


def _check_image_resize(spec: dict[str, Any], path: KeyPath, src: Source, problems: Problems) -> None:
    """``image_resize`` resolved now (``auto`` reads the served checkpoint), so ``config check``
    refuses what ``run`` would: a preset it does not know, a checkpoint with no processor config."""
    if spec.get("image_resize") in (None, False):
        return
    from fasteval.images.processor import processor_resize  # here: pyvips stays out of a plain config load

    serve = spec.get("serve")
    checkpoint = Path(str(serve["model"])) if isinstance(serve, dict) and serve.get("model") else None
    try:
        processor_resize(spec["image_resize"], checkpoint)
    except ValueError as e:
        problems.add(src, (*path, "image_resize"), str(e))


def _check_batch(spec: dict[str, Any], path: KeyPath, src: Source, problems: Problems) -> None:
    """``batch:`` only where the endpoint has a batch API we speak (not vLLM, gateways or served models)."""
    if spec.get("batch") in (None, False):
        return
    from providers import BatchSettings, batch_providers, batch_wires

    where: KeyPath = (*path, "batch")
    try:
        BatchSettings.from_config(spec["batch"])
    except ValueError as e:
        problems.add(src, where, str(e))
        return
    provider = str(spec.get("provider"))
    kind = providers().get(provider)
    if kind is None or kind.batch_factor is None or spec.get("serve") is not None:
        problems.add(src, where, f"provider {provider} has no batch API (batch mode: {', '.join(batch_providers())})")
    elif kind.batch_wire(wire := kind.wire_of(spec)) is None:
        problems.add(src, where, f"batch mode for the {wire} wire is not supported yet ({', '.join(batch_wires())} are)")


def check_suite(entry: Any, path: KeyPath, src: Source, problems: Problems, base: Path) -> Any:
    """A suite entry; returns it with its path options resolved against the config's folder."""
    from fasteval.suites.base import SUITES
    from fasteval.tools.base import TOOLS

    if not isinstance(entry, dict) or not entry.get("name"):
        problems.add(src, path, f"every suite needs a 'name' (got {entry!r})")
        return entry
    name = entry["name"]
    cls = SUITES.get(name)
    if cls is None:
        problems.add(src, (*path, "name"), f"unknown suite {name!r}{did_you_mean(str(name), SUITES)} "
                     f"(known: {', '.join(sorted(SUITES))})")
        return entry
    shape = {"name": Opt("str"), "options": Opt("dict"), "settings": Opt("list")}
    out = check_mapping(entry, shape, path, src, problems)
    options = entry.get("options") or {}
    declared: OptionSchema | None = getattr(cls, "options_schema", None)
    if isinstance(options, dict) and declared is not None:
        out["options"] = check_mapping(options, declared, (*path, "options"), src, problems, base)
    setting_opts: OptionSchema | None = getattr(cls, "setting_options", None)
    settings = entry.get("settings") or []
    if not isinstance(settings, list):
        return out
    for i, s in enumerate(settings):
        where: KeyPath = (*path, "settings", i)
        if not isinstance(s, dict):
            problems.add(src, where, f"expected a mapping with a 'name', got {s!r}")
            continue
        check_mapping(s, SETTING_FIELDS, where, src, problems)
        for j, tool in enumerate(s.get("tools") or []):
            if isinstance(tool, str) and tool not in TOOLS:
                problems.add(src, (*where, "tools", j), f"unknown tool {tool!r}{did_you_mean(tool, TOOLS)} "
                             f"(known: {', '.join(sorted(TOOLS))})")
        sopts = s.get("options")
        if not isinstance(sopts, dict):
            continue
        if setting_opts is not None:
            check_mapping(sopts, {**SETTING_COMMON_OPTIONS, **setting_opts}, (*where, "options"), src, problems)
        tool_options = sopts.get("tool_options")
        if isinstance(tool_options, dict):
            for tool, topts in tool_options.items():
                tpath: KeyPath = (*where, "options", "tool_options", tool)
                if tool not in TOOLS:
                    problems.add(src, tpath, f"unknown tool {tool!r}{did_you_mean(str(tool), TOOLS)}")
                    continue
                tschema: OptionSchema | None = getattr(TOOLS[tool], "option_schema", None)
                if tschema is not None and isinstance(topts, dict):
                    check_mapping(topts, {**TOOL_COMMON_OPTIONS, **tschema}, tpath, src, problems)
    return out


# ``vllm serve`` options a custom ``serve.command`` would silently drop: refused, so a run never
# starts without the context length, the LoRA adapters or the arguments the config asked for.
COMMAND_REPLACES = ("args", "max_model_len", "gpu_memory_utilization", "lora_modules", "api_server_count")


def check_serve_command(serve: dict[str, Any], name: str, path: KeyPath, src: Source, problems: Problems) -> None:
    """A ``serve.command`` template: every placeholder known, nothing beside it that it would ignore.

    Each part is filled in as a replica's start would fill it, so an unknown placeholder (a JSON
    argument like ``'{"temperature": 0}'`` reads as one) is a config error here, not a server that
    never starts with its reason only in run.log.
    """
    from providers import ServeConfigError, ServeSpec

    command = serve.get("command")
    binary_only = isinstance(command, list) and len(command) == 1  # names the vllm binary: options still apply
    for key in COMMAND_REPLACES:
        if not binary_only and serve.get(key) not in (None, [], {}):
            problems.add(src, (*path, key), f"serve.{key} is not applied when serve.command is set (the command "
                         "replaces `vllm serve` and its options): put it in serve.command, or drop serve.command")
    command = serve.get("command")
    if not isinstance(command, list):
        return
    for i, part in enumerate(command):
        try:
            probe = ServeSpec.from_config(name, {"model": str(serve.get("model") or "m"), "command": [part]})
            probe.command_line(port=1, host="127.0.0.1", replica=0)
        except (ServeConfigError, ValueError, KeyError, IndexError, AttributeError) as e:
            problems.add(src, (*path, "command", i), f"{str(e).removeprefix(f'model {name}: ')} in {part!r}: "
                         "placeholders are {model} {port} {host} {served_model_name} {tensor_parallel_size} "
                         "{replica} {cpus} {gpus} {python} {lora_modules}; write {{ and }} for a literal brace (e.g. '{{\"temperature\": 0}}')")


def check_published(entries: Any, src: Source, problems: Problems) -> None:
    """A config's own published numbers: the fields of ``PUBLISHED_FIELDS``, a known suite, a percentage."""
    from fasteval.suites import SUITES
    from fasteval.suites.published import PUBLISHED_FIELDS

    if not isinstance(entries, list):
        return  # not a list: the top-level check said so
    for i, entry in enumerate(entries):
        where: KeyPath = ("published", i)
        if not isinstance(entry, dict):
            problems.add(src, where, f"expected a mapping of {', '.join(PUBLISHED_FIELDS)}, got {entry!r}")
            continue
        check_mapping(entry, PUBLISHED_FIELDS, where, src, problems)
        suite = entry.get("suite")
        if isinstance(suite, str) and suite not in SUITES:
            problems.add(src, (*where, "suite"), f"unknown suite {suite!r}{did_you_mean(suite, SUITES.names())}")
        value = entry.get("value")
        if isinstance(value, int | float) and not isinstance(value, bool) and not 0 <= value <= 100:
            problems.add(src, (*where, "value"), f"{value!r} is not a percentage (0..100, as the paper prints it)")
