"""Suites; importing this package registers the built-in ones by name."""

from fasteval.suites import (  # noqa: F401  (register)
           demo,
           hrbench,
           jsonl,
           mme_realworld,
           tir_synth,
           tirbench,
           treebench,
           vistahop,
           visualprobe,
           visualtoolbench,
           vstar,
)
from fasteval.suites.base import (
           SUITES,
           LoadError,
           Score,
           ScoreContext,
           Setting,
           Suite,
           make_suite,
           register_suite,
)

__all__ = ["SUITES", "LoadError", "Score", "ScoreContext", "Setting", "Suite", "demo", "jsonl", "tir_synth", "tirbench", "vistahop", "visualtoolbench", "make_suite",
           "register_suite"]
