"""``fasteval batches list|cancel RUN``: a run's provider batches, from its journal."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasteval.cli.commands import HELP
from fasteval.cli.common import console, print_json
from fasteval.core.exitcodes import EXIT_OK, EXIT_USAGE
from fasteval.core.terminal import clean, plain

if TYPE_CHECKING:
    from fasteval.config.endpoint import EndpointSpec


def cmd_list(a: argparse.Namespace) -> int:
    from rich.table import Table

    from fasteval.runfolder.batch_journal import batch_rows

    run_dir = Path(a.run_dir)
    if not run_dir.is_dir():
        print(f"error: no run folder {clean(str(run_dir))}", file=sys.stderr)
        return EXIT_USAGE
    rows = batch_rows(run_dir)
    if a.format == "json":
        print_json(rows)
        return EXIT_OK
    t = Table(title=plain(f"{run_dir}: {len(rows)} batch(es)"))
    for col in ("model", "batch_id", "requests", "succeeded", "state", "age"):
        t.add_column(col)
    for r in rows:
        t.add_row(*(plain(r[c] if c != "batch_id" else r[c] or "-") for c in
                    ("model", "batch_id", "requests", "succeeded", "state")), f"{r['age_s'] / 60:.0f} min")
    console().print(t)
    return EXIT_OK


def cmd_cancel(a: argparse.Namespace) -> int:
    import uvloop

    from fasteval.cli.common import private_run_files
    from fasteval.core.redact import add_secrets_from_env, redact_text, secret_like_env_names
    from fasteval.engine.offline.batch_admin import cancel_batches
    from fasteval.runfolder.lock import run_folder_lock

    run_dir = Path(a.run_dir)
    if not run_dir.is_dir():
        print(f"error: no run folder {clean(str(run_dir))}", file=sys.stderr)
        return EXIT_USAGE
    specs = _endpoints(a, run_dir)
    if specs is None:
        return EXIT_USAGE
    add_secrets_from_env({s.key_env for s in specs if isinstance(s.key_env, str)}
                         | secret_like_env_names())

    def say(line: str) -> None:  # batch ids, status words and error bodies are the provider's text
        print(clean(redact_text(line)), file=sys.stderr)

    # the journal's new lines, like every run folder file; never beside a run that polls the same batches
    with private_run_files(shared=False), run_folder_lock(run_dir, "batches cancel"):
        cancelled, kept = uvloop.run(cancel_batches(run_dir, specs, poll_s=a.poll_s, say=say))
    say(f"{cancelled} batch(es) cancelled; {kept} finished result(s) collected into the journal; a rerun of the "
        "sweep resubmits the cancelled requests")
    return EXIT_OK


def _endpoints(a: argparse.Namespace, run_dir: Path) -> list[EndpointSpec] | None:
    """The batched entries to cancel through: ``--config``'s, or the manifest's once trusted (rescore's rule:
    a manifest ``base_url`` that would get a key needs ``--trust-manifest``); None after saying why not."""
    from fasteval.cli.common import print_config_error
    from fasteval.cli.rescore import manifest_endpoints
    from fasteval.core.errors import ConfigError
    from fasteval.engine.offline.batch_admin import batched_specs, manifest_specs

    if a.config:
        from fasteval.config.load import load_config

        try:
            cfg = load_config(a.config)
        except ConfigError as e:
            print_config_error(e)
            return None
        return batched_specs(cfg)
    specs = manifest_specs(run_dir)  # DamagedRunFolder (a UsageError: one line, exit 2) for an entry it cannot type
    untrusted = [] if a.trust_manifest else manifest_endpoints({s.name: s for s in specs}, given=set())
    if untrusted:
        print(clean(f"error: {run_dir}/manifest.json names endpoints that would get your keys:"), file=sys.stderr)
        for line in untrusted:
            print(f"  {clean(line)}", file=sys.stderr)
        print("the manifest is not a config you passed (anyone who can write the run folder can change it): pass "
              "--config CONFIG with the models to use, or --trust-manifest once you have checked these",
              file=sys.stderr)
        return None
    return specs


def add_parser(sub: Any) -> None:
    b = sub.add_parser("batches", help=HELP["batches"])
    bs = b.add_subparsers(dest="batches_command", required=True)
    ls = bs.add_parser("list", help="the run's batches, from its journal")
    ls.add_argument("run_dir")
    ls.add_argument("--format", choices=["table", "json"], default="table")
    ls.set_defaults(func=cmd_list)
    c = bs.add_parser("cancel", help="cancel the run's open batches and collect their partial results")
    c.add_argument("run_dir")
    c.add_argument("--poll-s", type=float, default=5.0, help="seconds between polls while the cancels finish")
    c.add_argument("--config", help="the sweep's config: its batched models' endpoints and keys (not the manifest's)")
    c.add_argument("--trust-manifest", action="store_true",
                   help="use the endpoints the run's manifest names (checked by you) without --config")
    c.set_defaults(func=cmd_cancel)
