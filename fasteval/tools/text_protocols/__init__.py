"""Text tool protocols: harnesses whose models write tool calls as tagged text (DeepEyes,
Mini-o3), each one how to parse a reply, which tool it runs and how the result goes back."""

from fasteval.tools.text_protocols.base import ParsedTurn, TextProtocol
from fasteval.tools.text_protocols.deepeyes import (
           DeepEyesProtocol,
           DeepEyesTexts,
           DeepEyesZoom,
           deepeyes_crop,
)
from fasteval.tools.text_protocols.mini_o3 import MiniO3Grounding, MiniO3Protocol, MiniO3Texts

PROTOCOLS = (DeepEyesProtocol.name, MiniO3Protocol.name)
"""The names a setting's ``protocol`` option takes."""

__all__ = ["PROTOCOLS", "DeepEyesProtocol", "DeepEyesTexts", "DeepEyesZoom", "MiniO3Grounding", "MiniO3Protocol",
           "MiniO3Texts", "ParsedTurn", "TextProtocol", "deepeyes_crop"]
