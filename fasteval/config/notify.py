"""``notify:``: who is told when a sweep nobody watches ends or goes wrong, typed once at load.

A notifier is a command (an argument list, run without a shell, the event as JSON on its standard
input) and/or a URL that gets the event as a JSON POST. ``url_env`` names an environment variable
holding the URL, for webhooks whose URL is itself the secret (Slack, Discord): a config is copied
into the run folder's manifest, an environment variable is not. The notifier is how a run is
watched, not what it computes: changing it never makes a run folder's config "changed".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from fasteval.core.options import Opt

NOTIFY_OPTIONS: dict[str, Opt] = {
    "command": Opt("str_list", "argument list run on each event (no shell), the event as JSON on stdin"),
    "url": Opt("str", "http(s) URL the event is POSTed to as JSON"),
    "url_env": Opt("str", "environment variable holding that URL (a webhook whose URL is a secret)"),
    "timeout_s": Opt("float", "seconds a command or POST may take before it is abandoned (default 10)"),
    "check_s": Opt("float", "seconds between checks of the running sweep (default 30)"),
    "finished": Opt("bool", "tell when the sweep ends, with its exit code and summary (default true)"),
    "endpoint_down_min": Opt("float", "tell when an endpoint has been down this many minutes (default 10)"),
    "error_rate": Opt("float", "tell when this share of finished jobs ended in error (0-1; default off)"),
    "min_jobs": Opt("int", "finished jobs before the error rate is judged (default 20)"),
    "disk_free_gb": Opt("float", "tell when the run folder's disk has less free space than this (default 5)"),
}


@dataclass(frozen=True, slots=True)
class NotifySpec:
    command: tuple[str, ...] = ()
    url: str | None = None
    url_env: str | None = None
    timeout_s: float = 10.0
    check_s: float = 30.0
    finished: bool = True
    endpoint_down_min: float | None = 10.0
    error_rate: float | None = None
    min_jobs: int = 20
    disk_free_gb: float | None = 5.0

    @property
    def watches(self) -> bool:
        """Whether anything is checked while the sweep runs (else only its end is told)."""
        return any(v is not None for v in (self.endpoint_down_min, self.error_rate, self.disk_free_gb))


def notify_problems(spec: Any) -> list[tuple[str, str]]:
    """(key, message) for each problem the schema's types do not catch."""
    if not isinstance(spec, dict):
        return []
    out: list[tuple[str, str]] = []
    if not spec.get("command") and not spec.get("url") and not spec.get("url_env"):
        out.append(("", "a notifier needs command, url or url_env"))
    command = spec.get("command")
    if command is not None and (not isinstance(command, list) or not all(isinstance(a, str) and a for a in command)):
        out.append(("command", "an argument list of non-empty strings, e.g. [notify-send, fasteval]"))
    url = spec.get("url")
    if isinstance(url, str) and urlsplit(url).scheme not in ("http", "https"):
        out.append(("url", f"an http:// or https:// URL, got {url!r}"))
    rate = spec.get("error_rate")
    if isinstance(rate, int | float) and not isinstance(rate, bool) and not 0 < rate <= 1:
        out.append(("error_rate", f"a share of jobs in (0, 1], got {rate}"))
    for key in ("timeout_s", "check_s", "endpoint_down_min", "disk_free_gb", "min_jobs"):
        v = spec.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool) and v <= 0 and not (key == "min_jobs" and v == 0):
            out.append((key, f"must be positive, got {v}"))
    return out


def notify_spec(spec: dict[str, Any] | None) -> NotifySpec | None:
    """The typed notifier of a validated ``notify:`` entry (None when the config has none)."""
    if not spec:
        return None
    d = NotifySpec()
    return NotifySpec(command=tuple(spec.get("command") or ()), url=spec.get("url"), url_env=spec.get("url_env"),
                      timeout_s=float(spec.get("timeout_s", d.timeout_s)), check_s=float(spec.get("check_s", d.check_s)),
                      finished=bool(spec.get("finished", True)),
                      endpoint_down_min=_num(spec, "endpoint_down_min", d.endpoint_down_min),
                      error_rate=_num(spec, "error_rate", d.error_rate), min_jobs=int(spec.get("min_jobs", d.min_jobs)),
                      disk_free_gb=_num(spec, "disk_free_gb", d.disk_free_gb))


def _num(spec: dict[str, Any], key: str, default: float | None) -> float | None:
    """A threshold; ``null`` in the config turns that check off."""
    if key not in spec:
        return default
    return None if spec[key] is None else float(spec[key])
