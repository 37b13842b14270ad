"""docs/config.md's reference has a row for every key a config may hold (#39 item 16).

It lacked ``run.gpus``, ``run.browser``, ``prices``, ``batch_api``, ``local_media`` and the options of
the five newer suites: the validator accepted keys the manual never named. The declarations are
the source (``fasteval.core.options.Opt`` next to the code that reads each key); this test reads
each section's rows and names every declared key that has none, and every row that names no key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from fasteval.config.schema import (
    ENDPOINT_COMMON,
    RUN_OPTIONS,
    SETTING_COMMON_OPTIONS,
    SETTING_FIELDS,
    TOP_LEVEL,
    provider_schemas,
)
from fasteval.core.options import Opt
from fasteval.suites.base import SUITES
from providers import providers

DOC = Path(__file__).resolve().parents[2] / "docs" / "config.md"
_ROW = re.compile(r"^\| `([^`]+)` \|")


def sections() -> dict[str, set[str]]:
    """The reference's bold section headings and the keys of the table under each."""
    text = DOC.read_text().split("## Reference", 1)[1]
    out: dict[str, set[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("**"):
            current = line.split("**")[1]
            out.setdefault(current, set())
        elif current is not None and (m := _ROW.match(line)):
            out[current].add(m.group(1))
    return out


_PROVIDERS = re.compile(r"^`provider: ([^`]+)` adds$")


def provider_keys() -> dict[str, set[str]]:
    """What each provider's entry may hold beside every entry's keys (a servable one: ``checkpoints``)."""
    kinds = providers()
    return {name: {k for k in schema if k not in ENDPOINT_COMMON} | ({"checkpoints"} if kinds[name].servable else set())
            for name, schema in provider_schemas().items()}


def declared() -> dict[str, Mapping[str, Opt]]:
    """Each section heading (but the providers') and the declarations its table must cover."""
    want: dict[str, Mapping[str, Opt]] = {
        "Top level": TOP_LEVEL, "Every model or role entry": ENDPOINT_COMMON, "`run:`": RUN_OPTIONS,
        "A setting (`suites[].settings[]`)": SETTING_FIELDS,
        "Setting `options` every suite accepts": SETTING_COMMON_OPTIONS}
    for key, opt in RUN_OPTIONS.items():
        if opt.fields is not None:
            want[f"`run.{key}:`"] = opt.fields
    for name, cls in SUITES.items():
        if getattr(cls, "options_schema", None):
            want[f"Suite `{name}`: `options`"] = cls.options_schema
        if getattr(cls, "setting_options", None):
            want[f"Suite `{name}`: setting `options`"] = cls.setting_options
    return want


def provider_sections() -> dict[tuple[str, ...], set[str]]:
    """``provider: a | b`` sections: the providers each names and its rows."""
    return {tuple(m.group(1).split(" | ")): keys for title, keys in sections().items()
            if (m := _PROVIDERS.match(title))}


def test_every_declared_key_has_a_row_in_its_section() -> None:
    have = sections()
    missing = {title: sorted(set(opts) - have.get(title, set())) for title, opts in declared().items()}
    documented: dict[str, set[str]] = {}
    for names, keys in provider_sections().items():
        for name in names:
            documented.setdefault(name, set()).update(keys)
    for name, keys in provider_keys().items():
        missing[f"provider {name}"] = sorted(keys - documented.get(name, set()))
    missing = {t: keys for t, keys in missing.items() if keys}
    assert not missing, f"docs/config.md's reference lacks: {missing}"


def test_every_row_names_a_declared_key() -> None:
    want = declared()
    extra = {t: sorted(keys - set(want[t])) for t, keys in sections().items() if t in want}
    per_provider = provider_keys()
    for names, keys in provider_sections().items():
        assert all(n in per_provider for n in names), names
        extra[" | ".join(names)] = sorted(k for k in keys if not any(k in per_provider[n] for n in names))
    extra = {t: keys for t, keys in extra.items() if keys}
    assert not extra, f"docs/config.md's reference has rows for keys no config may hold: {extra}"
    others = {t for t in sections() if t not in want and not _PROVIDERS.match(t)}
    assert others <= {"Tool options"}, sorted(others)
