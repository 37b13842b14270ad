"""Fuzzing the config loader: any text, and any values under every top-level key, is a config or a
ConfigError (exit 2, one line per problem), never another exception, and never slow to refuse."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fasteval.config.load import load_config
from fasteval.core.errors import ConfigError

FUZZ = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=10)
KEYS = ["seeds", "models", "roles", "suites", "run", "name", "include", "serve", "x"]
docs = st.dictionaries(st.sampled_from(KEYS), values, max_size=6)
# YAML's own syntax, anchors, aliases, tags and merge keys included
yaml_text = st.text(st.sampled_from(list("abc: -[]{}&*!<>|'\"#,\n 0129.%@`?")), max_size=120)


def _load(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sweep.yaml"
        path.write_text(text)
        try:
            load_config(path, check_paths=False)
        except ConfigError as e:
            assert e.problems and all(isinstance(p, str) and p for p in e.problems)


@pytest.mark.slow
@FUZZ
@given(docs)
def test_any_values_under_the_top_level_keys_are_a_config_or_a_config_error(doc: dict[str, object]) -> None:
    _load(yaml.safe_dump(doc))


@FUZZ
@given(yaml_text)
def test_any_yaml_text_is_a_config_or_a_config_error(text: str) -> None:
    _load(text)
