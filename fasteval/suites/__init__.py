"""Suites; importing this package registers the built-in ones by name."""

from fasteval.suites import demo, jsonl, tir_synth, tirbench, vistahop, visualtoolbench
from fasteval.suites import hrbench, mme_realworld, treebench, visualprobe, vstar  # noqa: F401  (register)
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
