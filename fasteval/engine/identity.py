"""What shapes a job's result: the fingerprints of its model, suite and setting (docs/run-folder.md).

A job's fingerprint is its group's (model × suite × setting) and its task and seed
(``fasteval.core.types.Job``); each component hashes the fields that shape a result and nothing
else, read off the same declarations the config is checked with (``Opt.shapes``):

- a model entry: every option but where the endpoint is and how it is paced (name, URL, key,
  limits, timeouts, retries, batch mode, prices, the sim's latency and faults); a served
  checkpoint by its fingerprint (``providers.local.checkpoint_identity``), not its path;
- a suite entry: its name and ``scorer_version``, its options but paths, the content of
  the tasks it loaded (text, image hashes, references, metadata) and its reference texts' hashes;
- a setting: tools, rounds, fidelity, protocol, options, and the judges its scoring calls.

Undeclared keys count (a change we cannot classify reruns rather than mixes). Names count only in
the run folder's ``job_id``: a fingerprint is what was computed, whatever the entry is called.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from fasteval.config.endpoint import EndpointSpec
from fasteval.config.load import SweepConfig
from fasteval.config.schema import ENDPOINT_COMMON
from fasteval.core.options import OptionSchema
from fasteval.core.types import Identity, Task
from fasteval.suites.base import LoadError, Setting

if TYPE_CHECKING:
    from fasteval.engine.plan import SuiteRun


def fingerprint_fields(fields: Mapping[str, Any]) -> str:
    """The fingerprint (16 hex) of a component's fields: canonical JSON, keys sorted."""
    data = orjson.dumps(fields, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
    return hashlib.sha256(data).hexdigest()[:16]


def shaping(entry: Mapping[str, Any], schema: OptionSchema | None) -> dict[str, Any]:
    """The keys of ``entry`` that shape a result (declared ``shapes``, or not declared at all)."""
    out: dict[str, Any] = {}
    for key, value in entry.items():
        opt = schema.get(key) if schema is not None else None
        if opt is not None and not opt.shapes:
            continue
        if opt is not None and opt.fields is not None and isinstance(value, Mapping):
            value = shaping(value, opt.fields)
        out[str(key)] = value
    return out


def model_fields(spec: EndpointSpec, checkpoint: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What of a model (or role) entry shapes a result; a served one's checkpoint by fingerprint."""
    fields = shaping(spec.options, {**ENDPOINT_COMMON, **spec.kind.options()})
    fields.update(provider=spec.provider, wire=spec.wire, model=spec.model)
    if checkpoint is not None:
        fields["checkpoint"] = checkpoint.get("fingerprint")
    return fields


def data_hash(items: Iterable[Task | LoadError]) -> str:
    """The content of what a suite loaded, in order: what its tasks ask and how they are graded."""
    h = hashlib.sha256()
    for item in items:
        h.update(orjson.dumps(item, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str))
        h.update(b"\n")
    return h.hexdigest()[:16]


def _texts(manifest: Mapping[str, Any] | None) -> Any:
    """A suite's reference texts by content (their sha256), not by where the repository lies."""
    if not manifest:
        return None
    texts = manifest.get("texts")
    if isinstance(texts, list) and all(isinstance(t, Mapping) and "sha256" in t for t in texts):
        return {"mode": manifest.get("mode"), "texts": sorted([str(t.get("name")), str(t["sha256"])] for t in texts)}
    return {k: v for k, v in manifest.items() if k != "reference_repo"}


def suite_fields(run: SuiteRun) -> dict[str, Any]:
    """What of a suite entry shapes a result: name, version, options but paths, data, texts."""
    cls = type(run.suite)
    schema = cls.options_schema
    options = {k: v for k, v in shaping(run.suite.options, schema).items()
               if not (schema is not None and k in schema and schema[k].type == "path")}
    return {"suite": run.suite.name, "version": str(cls.scorer_version), "options": options,
            "data": run.data_hash, "texts": _texts(run.suite.text_manifest())}


@dataclass(slots=True)
class Fingerprints:
    """Every component's fingerprint and fields for one config and its loaded suites.

    ``identity`` is asked once per group by the plan (it is cached), never once per job.
    """

    models: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    """Model name -> (fingerprint, fields)."""
    roles: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    suites: dict[int, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    """id(SuiteRun) -> (fingerprint, fields)."""
    settings: dict[tuple[int, str], tuple[str, dict[str, Any]]] = field(default_factory=dict)
    _groups: dict[tuple[str, int, str], Identity] = field(default_factory=dict)

    def identity(self, model: str, run: SuiteRun, setting: Setting) -> Identity:
        key = (model, id(run), setting.name)
        found = self._groups.get(key)
        if found is None:
            found = self._groups[key] = Identity.of(self.models[model][0], self.suites[id(run)][0],
                                                    self.settings[id(run), setting.name][0])
        return found


def setting_fields(run: SuiteRun, setting: Setting, roles: Mapping[str, tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """What of a setting shapes a result: all but its name, and the judges its scoring calls."""
    fields = {k: v for k, v in asdict(setting).items() if k != "name"}
    fields["roles"] = {r: roles[r][0] for r in sorted(run.suite.roles_needed(setting)) if r in roles}
    return fields


def fingerprints(cfg: SweepConfig, runs: list[SuiteRun],
                 checkpoints: Mapping[str, Mapping[str, Any]] | None = None) -> Fingerprints:
    """The components of a plan; ``checkpoints`` (``checkpoint_identities``) computed here if not given."""
    if checkpoints is None:
        checkpoints = checkpoint_identities(cfg)
    out = Fingerprints()
    for m in cfg.models:
        fields = model_fields(m, checkpoints.get(m.name))
        out.models[m.name] = (fingerprint_fields(fields), fields)
    for name, role in cfg.roles.items():
        fields = model_fields(role, checkpoints.get(name))
        out.roles[name] = (fingerprint_fields(fields), fields)
    for run in runs:
        fields = suite_fields(run)
        out.suites[id(run)] = (fingerprint_fields(fields), fields)
        for s in run.settings:
            fields = setting_fields(run, s, out.roles)
            out.settings[id(run), s.name] = (fingerprint_fields(fields), fields)
    return out


def lora_groups(cfg: SweepConfig) -> dict[str, str]:
    """Model name -> the server it shares: every checkpoint of a LoRA series, on its series' server."""
    return {f"{name}@{c.step}": name for name, ckpts in cfg.series.items() for c in ckpts if c.adapter}


def checkpoint_identities(cfg: SweepConfig) -> dict[str, dict[str, Any]]:
    """{served name: {path, kind, fingerprint}}: what a served model computes with (its fingerprint
    is part of the model's), also kept in the manifest.

    A LoRA series' step is its adapter on its base: a new adapter or a new base is a new identity.
    """
    from providers import checkpoint_identity

    entries = [(m.name, m) for m in cfg.models] + list(cfg.roles.items())
    shared = lora_groups(cfg)
    out: dict[str, dict[str, Any]] = {}
    seen: dict[str, dict[str, Any]] = {}  # a LoRA series' base is read once, not once per step

    def identity(model: str) -> dict[str, Any]:
        if model not in seen:
            seen[model] = checkpoint_identity(model)
        return seen[model]

    for name, e in entries:
        if e.serve is None:
            continue
        base = identity(str(e.serve.get("model", "")))
        if name in shared:
            adapter = identity(str(e.serve["lora_modules"][name]))
            key = f"{base['fingerprint']}+{adapter['fingerprint']}"
            base = {**adapter, "base": base["path"], "fingerprint": hashlib.sha256(key.encode()).hexdigest()[:16]}
        out[name] = base
    return out
