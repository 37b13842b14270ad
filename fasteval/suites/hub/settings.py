"""How fasteval reaches the Hugging Face hub: the endpoint, offline mode and token, from the
environment variables the hub's own tools read, and the errors a download ends with.

``HF_ENDPOINT`` points at a mirror (default https://huggingface.co); ``HF_HUB_OFFLINE=1`` forbids
the network, so only files already fetched are used; ``HF_TOKEN`` opens gated and private
datasets (sent only to the endpoint's own host, never to the content host it redirects to).
Hub datasets named by ``hf://`` and images by URL are kept in the data cache,
``$FASTEVAL_CACHE_DIR/data`` (else ``~/.cache/fasteval/data``), beside the response cache.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_ENDPOINT = "https://huggingface.co"
TRUE_VALUES = frozenset({"1", "ON", "YES", "TRUE"})
"""What the hub's tools read as true in HF_HUB_OFFLINE."""


class HubError(Exception):
    """A download that did not happen; the message is one line saying why and what to do."""


class HubUnreachable(HubError):
    """No network path to the endpoint (DNS, refused, timed out)."""


class ChecksumMismatch(HubError):
    """Bytes that are not the ones the hub or the lock file vouches for; nothing of them is kept."""


@dataclass(frozen=True, slots=True)
class HubSettings:
    endpoint: str = DEFAULT_ENDPOINT
    offline: bool = False
    token: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> HubSettings:
        env = os.environ if env is None else env
        offline = (env.get("HF_HUB_OFFLINE") or env.get("TRANSFORMERS_OFFLINE") or "").strip().upper()
        token = env.get("HF_TOKEN") or env.get("HUGGING_FACE_HUB_TOKEN") or None
        endpoint = (env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).strip().rstrip("/") or DEFAULT_ENDPOINT
        return cls(endpoint=endpoint, offline=offline in TRUE_VALUES, token=token)


def data_cache_root(env: Mapping[str, str] | None = None) -> Path:
    """Where hub datasets named by ``hf://`` and images by URL are kept between runs."""
    env = os.environ if env is None else env
    base = Path(env["FASTEVAL_CACHE_DIR"]).expanduser() if env.get("FASTEVAL_CACHE_DIR") else \
        Path.home() / ".cache" / "fasteval"
    return base / "data"


def offline_hint(what: str) -> str:
    """The one line that says what to do without a network."""
    return (f"{what}; check the network (or a proxy), point HF_ENDPOINT at a reachable mirror, or copy the files "
            "by hand; once they are here, HF_HUB_OFFLINE=1 uses them without asking the hub")
