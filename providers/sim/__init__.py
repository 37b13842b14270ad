"""sim: the embedded default model, a scripted OpenAI-compatible server on loopback."""

from providers.sim import oracle as oracle  # registers the tir-synth policies
from providers.sim.policies import POLICIES, register_policy
from providers.sim.server import SimServer
from providers.sim.spec import Faults, SimModel

__all__ = ["POLICIES", "Faults", "SimModel", "SimServer", "register_policy"]
