"""tir-synth: procedural TIR-Bench-like tasks with answers known by construction.

Importing this package registers the ``tir-synth`` suite.
"""

from fasteval.suites.tir_synth.generators import GENERATORS, PALETTE, Synth, generate
from fasteval.suites.tir_synth.suite import TIRSynth

__all__ = ["GENERATORS", "PALETTE", "Synth", "TIRSynth", "generate"]
