"""``fasteval data fetch``: a benchmark's official files, checked against a lock file."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import Any

from fasteval.cli.commands import HELP
from fasteval.core.exitcodes import EXIT_OK
from fasteval.core.terminal import clean


def cmd_data_fetch(a: argparse.Namespace) -> int:
    """An unknown name or a fetch that cannot be done here is a UsageError (one line, exit 2, in
    cli/main.py); anything else is a bug of ours (exit 70 with its trace)."""
    from fasteval.suites.data_fetch import fetch

    def report(line: str) -> None:
        print(clean(line), file=sys.stderr, flush=True)

    path = fetch(a.name, Path(a.dest) if a.dest else None, revision=a.revision, update=a.update, report=report,
                 split=a.split, subset=a.subset)
    print(path)
    return EXIT_OK


def _names_help() -> str:
    """Every name ``data fetch`` takes, with where it comes from (read from the one table)."""
    from fasteval.suites.data_fetch import DATASETS, DEFAULT_DEST, REFERENCE_REPOS

    lines = ["benchmarks (default --dest in parentheses):"]
    lines += [f"  {n:<16} {s.repo_id} ({DEFAULT_DEST.get(n, 'data/' + n)}"
              f"{'; by hand only' if s.hub != 'huggingface' else ''})" for n, s in DATASETS.items()]
    lines.append("reference harnesses (git, at a pinned commit, into DEST/reference/):")
    lines += [f"  {n:<26} {r.repo}@{r.commit[:8]}" for n, r in REFERENCE_REPOS.items()]
    lines.append("a jsonl suite's hub source: hf://datasets/ORG/NAME[@REVISION] with --split/--subset, into the data "
                 "cache ($FASTEVAL_CACHE_DIR/data, or --dest), for machines that run with HF_HUB_OFFLINE=1")
    lines.append("environment: HF_ENDPOINT (a mirror), HF_HUB_OFFLINE=1 (use only what is here), HF_TOKEN "
                 "(gated datasets)")
    return "\n".join(lines)


class _NamesInHelp(argparse.ArgumentParser):
    """Lists the fetchable names in ``--help`` only, so building the CLI imports no suite code."""

    def format_help(self) -> str:
        if self.epilog is None and self.prog.endswith(" fetch"):
            self.epilog = _names_help()
        return super().format_help()


_DESCRIPTION = textwrap.fill(
    "Download a benchmark into the folder the configs read (or --dest): partial files are resumed, every file "
    "is checked against the hub's checksum, and fasteval.lock.json beside the data records each file's sha256; "
    "later fetches verify against it and refuse a changed file.", 88)


def add_parser(sub: Any) -> None:
    d = sub.add_parser("data", help=HELP["data"])
    dsub = d.add_subparsers(dest="data_command", required=True, parser_class=_NamesInHelp)
    df = dsub.add_parser("fetch", help="download a benchmark's official files (resumed, checked, locked)",
                         description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    df.add_argument("name", help="a benchmark, a reference harness or an hf://datasets/... source (listed below)")
    df.add_argument("--dest", help="folder (default: where the shipped configs read it, data/<benchmark>)")
    df.add_argument("--revision", help="a branch, tag or commit of the dataset (default: the lock's, else main)")
    df.add_argument("--update", action="store_true",
                    help="move the lock to the revision's current commit and fetch what changed")
    df.add_argument("--split", help="hf:// sources: the split to fetch (default: the only one)")
    df.add_argument("--subset", help="hf:// sources: the subset (configuration) folder")
    df.set_defaults(func=cmd_data_fetch)
