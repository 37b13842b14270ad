"""How many prompt tokens a provider bills for text and for an image, by its published formula.

Used before a sweep runs (``fasteval run --dry-run --estimate``), when no request has been sent:
the providers' own counts arrive only with their replies. Text is counted at four characters a
token, the usual figure for English under the GPT and Claude tokenizers (CJK text and code run
denser, so those prompts are undercounted). Images follow each provider's published rule:

- OpenAI (GPT-4o, GPT-4.1, o-series, GPT-5, ``detail: high``): fit in 2048 x 2048, shortest side
  down to 768, then 170 tokens per 512-pixel tile plus 85.
- Anthropic: shrink until the long edge is at most 1568 pixels and the area about 1.15 MP, then
  width x height / 750.
- Gemini (2.0 and later): 258 tokens for an image within 384 x 384, else 258 per 768 x 768 tile.
- the sim: its own rule (``providers.sim.server``: an image counts as 1024 characters).

A served open model counts by its processor (``fasteval.images.processor``); that rule is the
caller's, since this package imports nothing above ``fasteval.core``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

CHARS_PER_TOKEN = 4
SIM_IMAGE_CHARS = 1024
"""The sim bills an image as this many prompt characters (providers.sim.server reads it here)."""


@dataclass(frozen=True, slots=True)
class TokenRule:
    """One provider's prompt arithmetic: text, images, and whether tool definitions are billed."""

    name: str
    image: Callable[[int, int], int]
    """Tokens of one image of (width, height) pixels."""
    tool_specs_billed: bool = True
    """Hosted APIs bill the tool definitions they are sent; the sim counts messages only."""

    def text(self, chars: int) -> int:
        return math.ceil(chars / CHARS_PER_TOKEN)


def openai_image_tokens(width: int, height: int) -> int:
    scale = min(1.0, 2048 / max(width, height, 1))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / max(min(w, h), 1))
    w, h = w * scale, h * scale
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def anthropic_image_tokens(width: int, height: int) -> int:
    scale = min(1.0, 1568 / max(width, height, 1), math.sqrt(1_150_000 / max(width * height, 1)))
    return max(1, math.ceil(width * scale * height * scale / 750))


def gemini_image_tokens(width: int, height: int) -> int:
    if width <= 384 and height <= 384:
        return 258
    return 258 * math.ceil(width / 768) * math.ceil(height / 768)


def sim_image_tokens(width: int, height: int) -> int:
    return SIM_IMAGE_CHARS // CHARS_PER_TOKEN


OPENAI = TokenRule("openai tiles", openai_image_tokens)
ANTHROPIC = TokenRule("anthropic pixels/750", anthropic_image_tokens)
GEMINI = TokenRule("gemini tiles", gemini_image_tokens)
SIM = TokenRule("sim", sim_image_tokens, tool_specs_billed=False)

# OpenAI-compatible doors into the other vendors' models bill by those vendors' rules.
_BY_HOST = {"anthropic.com": ANTHROPIC, "googleapis.com": GEMINI}


def vendor_rule(base_url: str | None) -> TokenRule | None:
    """The rule of the vendor whose host serves ``base_url``, whatever wire reaches it; None for others.

    The wire's own rule is its entry's in ``providers.registry`` (``token_rule``), which this leaf
    does not import: the sim's server reads ``SIM_IMAGE_CHARS`` from here.
    """
    host = urlsplit(base_url or "").hostname or ""
    for suffix, rule in _BY_HOST.items():
        if host == suffix or host.endswith("." + suffix):
            return rule
    return None
