"""One map from the exception that ends a command to its exit code: ours say what to do, the rest are bugs."""

from __future__ import annotations

import pytest

from fasteval.core.errors import (
    ConfigError,
    DamagedRunFolder,
    ModelConfigError,
    RunDirUnwritable,
    UnsafeRunFolder,
)
from fasteval.core.exitcodes import (
    EXIT_INCOMPLETE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    RunIncomplete,
    exit_code_for,
)
from providers.local.gpus import GpuConfigError
from providers.local.spec import ServeConfigError


@pytest.mark.parametrize(("exc", "code"), [
    (ConfigError("x"), EXIT_USAGE),
    (ModelConfigError("model m: bad"), EXIT_USAGE),
    (ServeConfigError("serve"), EXIT_USAGE),
    (GpuConfigError("gpus"), EXIT_USAGE),
    (RunDirUnwritable("read-only"), EXIT_USAGE),
    (UnsafeRunFolder("a link"), EXIT_USAGE),
    (DamagedRunFolder("manifest.json: not an object"), EXIT_USAGE),
    (RunIncomplete("disk full"), EXIT_INCOMPLETE),
    (KeyboardInterrupt(), EXIT_INTERRUPTED),
    (KeyError("k"), EXIT_INTERNAL),
    (ValueError("v"), EXIT_INTERNAL),
    (TypeError("t"), EXIT_INTERNAL),
    (RuntimeError("r"), EXIT_INTERNAL),
])
def test_each_error_maps_to_the_exit_code_that_tells_the_truth(exc: BaseException, code: int) -> None:
    assert exit_code_for(exc) == code


def test_a_plain_value_error_is_internal_though_config_errors_still_are_value_errors() -> None:
    # Callers that catch ValueError around a model entry keep working; the CLI no longer does.
    assert isinstance(ModelConfigError("m"), ValueError) and isinstance(ServeConfigError("s"), ValueError)
    assert exit_code_for(ValueError("a bug")) != exit_code_for(ConfigError("a typo"))
