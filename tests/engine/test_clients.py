"""A model client built from a config entry: what a refused entry is told."""

from __future__ import annotations

import pytest

from fasteval.config.endpoint import EndpointSpec
from fasteval.core.errors import ModelConfigError
from fasteval.engine.run.clients import build_client


def test_serve_outside_a_sweep_names_every_provider_that_can_be_served() -> None:
    """The list comes from the providers table, so `openai` (servable) is in it, and it stays true."""
    spec = EndpointSpec.of("m", {"provider": "vllm", "serve": {"command": ["true"]}})
    with pytest.raises(ModelConfigError) as e:
        build_client("m", spec, sim_base_url=None, resolver=None)
    assert "(openai, openai_compat, sglang, vllm)" in str(e.value)
