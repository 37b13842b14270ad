"""Secrets have no place in a config: it is copied verbatim into every run folder's manifest.

A key pasted into a config anywhere (a model entry, ``extra_body``, ``params``, ``serve.env``,
``serve.args: [--api-key, ...]``, a role, a ``base_url``'s query such as ``?key=...``) would land in manifest.json, run.log and the servers'
files, so the whole tree is scanned for secret-named keys and secret-shaped values, and an
``api_key_env`` that holds a key instead of a variable name is refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

SECRET_KEYS = frozenset({"api_key", "apikey", "key", "token", "authorization", "password", "secret",
                         "access_token", "hf_token", "huggingface_token", "openai_api_key", "anthropic_api_key",
                         "gemini_api_key", "google_api_key", "x-api-key", "x-goog-api-key", "bearer"})
SECRET_FLAGS = frozenset({"--api-key", "--hf-token", "--token"})
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Vendor prefixes, then any long token that mixes upper case, lower case and digits (a commit hash
# or a digest is one case only and stays allowed).
_KEY_SHAPES = re.compile(r"(?:sk-|sk_|sk-ant-|AIza|hf_|ghp_|gho_|github_pat_|xox[abpr]-|glpat-|Bearer\s)\S{12,}")
_TOKEN = re.compile(r"[A-Za-z0-9_\-]{32,}")


def looks_like_key(value: str) -> bool:
    """A string shaped like an API key or token."""
    v = value.strip()
    if _KEY_SHAPES.fullmatch(v):
        return True
    return bool(_TOKEN.fullmatch(v)) and any(c.isupper() for c in v) and any(c.islower() for c in v) \
        and any(c.isdigit() for c in v)


def _is_secret_name(key: str) -> bool:
    k = key.lower()
    return k in SECRET_KEYS or k.endswith(("_token", "_api_key", "_secret", "_password"))


def secret_problems(spec: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """(key path, message) for every secret found in a config subtree."""
    if isinstance(spec, dict):
        for k, v in spec.items():
            where = (*path, str(k))
            if str(k) == "api_key_env":
                if isinstance(v, str) and (not _VARIABLE.fullmatch(v) or looks_like_key(v)):
                    yield where, ("api_key_env names the environment variable that holds the key; this looks "
                                  "like a key itself: export it (e.g. OPENAI_API_KEY=...) and name the variable")
                continue
            if _is_secret_name(str(k)) and isinstance(v, str | int) and str(v).strip():
                yield where, (f"do not put secrets in configs ({k!r}); put the key in an environment variable "
                              f"and name it with api_key_env (served models inherit the environment)")
                continue
            yield from secret_problems(v, where)
    elif isinstance(spec, list):
        for i, v in enumerate(spec):
            where = (*path, i)
            if isinstance(v, str):
                flag = v.split("=", 1)[0]
                after = spec[i + 1] if i + 1 < len(spec) else None
                if flag in SECRET_FLAGS and ("=" in v or isinstance(after, str)):
                    yield where, (f"do not put secrets in configs ({flag} ...): the server reads it from the "
                                  f"environment (e.g. VLLM_API_KEY), which fasteval never writes down")
                    continue
                if i > 0 and isinstance(spec[i - 1], str) and spec[i - 1] in SECRET_FLAGS:
                    continue  # the value of a flag reported above
            yield from secret_problems(v, where)
    elif isinstance(spec, str) and looks_like_key(spec):
        yield path, "this value looks like an API key or token: configs are copied into run folders; use an " \
                    "environment variable (api_key_env)"
    elif isinstance(spec, str) and (hole := url_secret(spec)):
        yield path, (f"this URL carries a secret ({hole}): configs are copied into run folders and URLs into "
                     "run.log; put the key in an environment variable and name it with api_key_env")


def url_secret(value: str) -> str | None:
    """Where a URL holds a secret (``?key=...``, ``?api_key=...``, ``user:password@``); None when it does not.

    A key-shaped value under any query name counts too: ``?x=AIza...`` is still a key.
    """
    if "://" not in value:
        return None
    try:
        u = urlsplit(value.strip())
        password = u.password
    except ValueError:
        return None
    if password:
        return "a password before the host"
    for name, v in parse_qsl(u.query, keep_blank_values=False):
        if (_is_secret_name(name) and v.strip()) or looks_like_key(v):
            return f"the query parameter {name!r}"
    return None
