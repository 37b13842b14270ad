"""``fasteval rescore``: re-judge finished trajectories without regenerating them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvloop

from fasteval.cli.commands import HELP
from fasteval.core.exitcodes import EXIT_OK, EXIT_USAGE, exit_code_for
from fasteval.core.terminal import clean

if TYPE_CHECKING:
    from fasteval.config.endpoint import EndpointSpec


def judge_spec(text: str) -> EndpointSpec:
    """``--judge``: a judge role as a JSON object, typed as a config entry would be (exit 2 when not)."""
    from fasteval.cli.common import json_object
    from fasteval.config.endpoint import EndpointSpec
    from fasteval.core.errors import ModelConfigError

    entry = json_object(text, "--judge")
    try:
        return EndpointSpec.of("judge", entry)
    except (KeyError, ValueError) as e:  # the entry's own shape: what a config load would refuse
        what = e.args[0] if e.args else e
        raise ModelConfigError(f"--judge: {'a provider is required' if what == 'provider' else what}") from None


def cmd_rescore(a: argparse.Namespace) -> int:
    from fasteval.cli.common import print_config_error
    from fasteval.config.load import config_from_manifest, load_config
    from fasteval.core.errors import ConfigError
    from fasteval.engine.offline.rescore import rescore
    from fasteval.runfolder.records import read_manifest

    run_dir = Path(a.run_dir)
    manifest = read_manifest(run_dir)
    if manifest is None:
        print(f"error: {run_dir} is not a run folder (no manifest.json)", file=sys.stderr)
        return EXIT_USAGE
    try:
        if a.config:
            cfg = load_config(a.config)
        else:
            cfg = config_from_manifest(manifest, run_dir)
        if a.judge:
            cfg.roles["judge"] = judge_spec(a.judge)
    except ConfigError as e:  # ours (a bad --judge, a config); a bug is an internal error (cli/main.py)
        print_config_error(e)
        return exit_code_for(e)
    untrusted = [] if a.config or a.trust_manifest else manifest_endpoints(cfg.roles, given={"judge"} if a.judge else set())
    if untrusted:
        print(clean(f"error: {run_dir}/manifest.json names endpoints that would get your keys or run a command:\n  "
                    + "\n  ".join(untrusted), block=True) + "\nthe manifest is not a config you passed (anyone who can write the run "
              "folder can change it): pass --config CONFIG with the roles to use, or --trust-manifest once you "
              "have checked these", file=sys.stderr)
        return EXIT_USAGE
    from fasteval.runfolder.lock import run_folder_lock

    with run_folder_lock(run_dir, "rescore"):  # appends records: never beside a run or another rescore
        res = uvloop.run(rescore(cfg, run_dir))
    print(f"{run_dir}: rescored {res.rescored} ok, {res.errors} error, {res.skipped} skipped; "
          f"judge requests {res.judge_requests}, judge cache hits {res.judge_cache_hits}", file=sys.stderr)
    return EXIT_OK


def manifest_endpoints(roles: Mapping[str, EndpointSpec], given: set[str]) -> list[str]:
    """One line per role read from a manifest that would send a key to its URL or start a server.

    A role with a key but no ``base_url`` goes to its vendor's own API, which is where the key
    belongs; a ``base_url`` or a ``serve:`` block from a tampered manifest could be anything.
    """
    out = []
    for name, spec in sorted(roles.items()):
        if name in given:
            continue
        if spec.serve is not None:
            command = spec.serve.get("command") if isinstance(spec.serve, dict) else None
            out.append(f"{name}: serves a model locally" + (f" with the command {command!r}" if command else ""))
        elif spec.key_env and spec.base_url:
            out.append(f"{name}: {spec.base_url} (with the key in ${spec.key_env})")
    return out


def add_parser(sub: Any) -> None:
    rs = sub.add_parser("rescore", help=HELP["rescore"])
    rs.add_argument("run_dir")
    rs.add_argument("--config", help="a config whose roles (judge, extractor) replace the run's")
    rs.add_argument("--judge", help='a judge role as JSON, e.g. \'{"provider": "openai", "base_url": ..., "model": ...}\'')
    rs.add_argument("--trust-manifest", action="store_true",
                    help="use the endpoints the run's manifest names (checked by you) without --config")
    rs.set_defaults(func=cmd_rescore)
