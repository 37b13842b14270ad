"""Declared options: what a component (suite, setting, tool, provider, sim policy, run) accepts.

A component lists its options as ``{name: Opt(...)}``; the config validator
(fasteval.config.schema) checks every key and value against these declarations before a run
starts, and ``fasteval config schema`` turns the same declarations into a JSON Schema. Keeping
the declaration next to the code that reads the option is what keeps the two from drifting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

OptType = Literal["str", "int", "float", "bool", "list", "dict", "path", "any", "int_or_list", "str_list"]
"""``float`` accepts ints too; ``path`` is a string resolved against the config file's folder;
``int_or_list`` is a count or an explicit list of ints (``seeds: 3`` or ``seeds: [0, 2]``)."""


@dataclass(frozen=True, slots=True)
class Opt:
    """One option: its type, a one-line description, and what the validator enforces."""

    type: OptType
    doc: str = ""
    choices: tuple[Any, ...] | None = None
    fields: Mapping[str, Opt] | None = None
    """For a ``dict`` with known keys: their declarations (unknown keys are then errors)."""
    values: Opt | None = None
    """For a ``dict`` with free keys (names of tools, limiters...): the declaration of each value."""
    required: bool = False
    exists: bool = False
    """For a ``path``: it must exist before the run starts."""
    fetch: str | None = None
    """For a ``path`` that ``fasteval data fetch NAME`` provides: NAME, quoted in the error."""
    shapes: bool = True
    """Whether the option shapes a job's result, and so its fingerprint (fasteval.engine.identity):
    False for where an endpoint is and how it is paced (URL, key, limits, retries, latency)."""


OptionSchema = Mapping[str, Opt]
"""A component's declared options; ``None`` in its place means "not declared, not checked"."""


def json_schema(opt: Opt) -> dict[str, Any]:
    """The JSON Schema of one option (editors complete and check configs with it)."""
    simple = {"str": "string", "path": "string", "int": "integer", "float": "number", "bool": "boolean",
              "list": "array"}
    out: dict[str, Any]
    if opt.type in simple:
        out = {"type": simple[opt.type]}
    elif opt.type == "str_list":
        out = {"type": "array", "items": {"type": "string"}}
    elif opt.type == "int_or_list":
        out = {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "array", "items": {"type": "integer"}}]}
    elif opt.type == "dict":
        out = {"type": "object"}
        if opt.fields is not None:
            out["properties"] = {k: json_schema(v) for k, v in opt.fields.items()}
            out["additionalProperties"] = False
            req = [k for k, v in opt.fields.items() if v.required]
            if req:
                out["required"] = req
        elif opt.values is not None:
            out["additionalProperties"] = json_schema(opt.values)
    else:
        out = {}
    if opt.choices is not None:
        out["enum"] = list(opt.choices)
    if opt.doc:
        out["description"] = opt.doc
    return out


def object_schema(fields: OptionSchema | None, doc: str = "") -> dict[str, Any]:
    """A JSON Schema object for a declared mapping (open when the component declares nothing)."""
    if fields is None:
        return {"type": "object", **({"description": doc} if doc else {})}
    return json_schema(Opt("dict", doc, fields=fields))
