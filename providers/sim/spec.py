"""What one simulated model is: its policy, its latency and the faults it injects."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fasteval.core.options import Opt

_FAULTS = {
    "p_429": Opt("float", "probability of a 429 per request"), "retry_after_s": Opt("float", "Retry-After of a 429"),
    "p_500": Opt("float"), "p_hang": Opt("float"), "hang_s": Opt("float"), "p_drop": Opt("float"),
    "p_malformed": Opt("float"), "schedule": Opt("str_list", "exact faults consumed first: 429, 500, 400, 401, "
                                                  "hang, drop, malformed, overflow, length, content_filter, refusal, ok"),
}

SIM_OPTIONS: dict[str, Opt] = {
    "policy": Opt("str", "the scripted behaviour (fasteval list policies)"),
    "tool_uses": Opt("int", "tool calls before answering (policy tools)"),
    "latency_ms": Opt("float", shapes=False), "latency_jitter_ms": Opt("float", shapes=False), "seed": Opt("int"),
    "script": Opt("list", "policy scripted: [{match: regex, reply: text}], first match wins"),
    "default_reply": Opt("str", "policy scripted: the reply when nothing matches"),
    "misread_rate": Opt("float", "policy tools: how often a demo answer is misread"),
    "faults": Opt("dict", "injected faults", fields=_FAULTS, shapes=False),
    "wire": Opt("str", "the API the sim speaks to this model (choices: the registry's wires)"),
    "thinking_budget": Opt("int", "wire anthropic/gemini: passed to the native client"),
    "reasoning_effort": Opt("str", "wire openai-responses: passed to the native client"),
    "prompt_caching": Opt("bool", "wire anthropic: passed to the native client", shapes=False),
    "batch_api": Opt("dict", "the sim's batch APIs for this model (providers/sim/batch_api.py)", fields={
        "turnaround_s": Opt("float", "seconds before a batch is processed (default 0.2)"),
        "cancel_s": Opt("float", "seconds a cancel takes"),
        "expire": Opt("int", "the first N batches expire with nothing done"),
        "fail": Opt("int", "the first N batches fail validation"),
        "reverse_responses": Opt("bool", "Gemini: a batch's responses (inline or file) come in reverse order"),
        "drop_responses": Opt("int", "Gemini: the last N responses of every batch go missing")}, shapes=False),
    "reasoning": Opt("bool", "wire responses: a reasoning model (reasoning items, no temperature; default true)"),
    "call_ids": Opt("bool", "wire gemini: functionCall parts carry an id that must come back (default true)"),
}
"""What a sim model entry may say besides the options every endpoint has."""


@dataclass(slots=True)
class Faults:
    """Probabilities per request, plus an exact schedule consumed first (for tests).

    Schedule entries: "429", "500", "503", "529", "400", "401", "hang", "drop", "malformed", "overflow", "ok",
    and endings of the policy's reply: "length" (cut by the output limit), "content_filter", "refusal".
    """

    p_429: float = 0.0
    retry_after_s: float = 0.05
    p_500: float = 0.0
    p_hang: float = 0.0
    hang_s: float = 3600.0
    p_drop: float = 0.0
    p_malformed: float = 0.0
    schedule: list[str] = field(default_factory=list)


@dataclass(slots=True)
class SimModel:
    """A scripted model served under ``name`` by the sim server."""

    name: str
    policy: str = "tools"
    tool_uses: int = 2
    latency_ms: float = 0.0
    latency_jitter_ms: float = 0.0
    seed: int = 0
    faults: Faults = field(default_factory=Faults)
    script: list[dict[str, str]] = field(default_factory=list)
    """For the ``scripted`` policy: [{"match": regex, "reply": text}], first match wins."""
    default_reply: str = "I don't know."
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, name: str, cfg: Mapping[str, Any]) -> SimModel:
        known = {"policy", "tool_uses", "latency_ms", "latency_jitter_ms", "seed", "script", "default_reply"}
        faults = Faults(**(cfg.get("faults") or {}))
        kwargs = {k: cfg[k] for k in known if k in cfg}
        options = {k: v for k, v in cfg.items() if k not in known | {"faults", "provider", "name", "model"}}
        return cls(name=name, faults=faults, options=options, **kwargs)
