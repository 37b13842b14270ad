"""sim: the embedded default model, a scripted OpenAI-compatible server on loopback.

A lazy face: naming a policy (``fasteval list policies``, the config check) must not import the
server and aiohttp, so each name loads its module on first use (``fasteval.core.face``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fasteval.core.face import lazy_face

if TYPE_CHECKING:  # ``name as name`` re-exports it, for the type checker
    from providers.sim.policies import POLICIES as POLICIES
    from providers.sim.policies import register_policy as register_policy
    from providers.sim.server import SimServer as SimServer
    from providers.sim.spec import Faults as Faults
    from providers.sim.spec import SimModel as SimModel

__getattr__, __all__ = lazy_face("providers.sim", {
    "policies": ("POLICIES", "register_policy"),
    "server": ("SimServer",),
    "spec": ("Faults", "SimModel"),
})
