"""``fasteval rescore``: re-judge finished trajectories without regenerating them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson
import uvloop

from fasteval.core.exitcodes import EXIT_OK, EXIT_USAGE


def cmd_rescore(a: argparse.Namespace) -> int:
    from fasteval.config.load import config_from_manifest, load_config
    from fasteval.core.errors import ConfigError
    from fasteval.engine.rescore import rescore
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
            cfg.roles["judge"] = dict(orjson.loads(a.judge))
    except (ConfigError, orjson.JSONDecodeError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    res = uvloop.run(rescore(cfg, run_dir))
    print(f"{run_dir}: rescored {res.rescored} ok, {res.errors} error, {res.skipped} skipped; "
          f"judge requests {res.judge_requests}, judge cache hits {res.judge_cache_hits}", file=sys.stderr)
    return EXIT_OK


def add_parser(sub: Any) -> None:
    rs = sub.add_parser("rescore", help="re-judge finished trajectories without regenerating them")
    rs.add_argument("run_dir")
    rs.add_argument("--config", help="a config whose roles (judge, extractor) replace the run's")
    rs.add_argument("--judge", help='a judge role as JSON, e.g. \'{"provider": "openai", "base_url": ..., "model": ...}\'')
    rs.set_defaults(func=cmd_rescore)
