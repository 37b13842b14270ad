"""``fasteval cache stats|export|import|prune``: inspect and move the shared cache between machines.

The main CLI calls ``add_cache_parser``; each subcommand sets ``func(args) -> int`` (an exit code).
These commands are synchronous and open their own connection, so they are safe to run while a sweep
is writing the same file (WAL readers never block the writer).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import orjson

from cache._store import NamespaceStats, default_cache_path
from cache._transfer import KeyRef, cache_stats, export_cache, import_cache, prune_cache, read_key_list
from fasteval.core.exitcodes import EXIT_JOB_ERRORS, EXIT_OK, EXIT_USAGE

log = logging.getLogger("fasteval.cache")


def _path(args: argparse.Namespace) -> Path:
    return Path(args.cache).expanduser() if args.cache else default_cache_path()


def _fmt_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _table(stats: list[NamespaceStats]) -> str:
    head = f"{'namespace':<12} {'entries':>9} {'stored':>11} {'raw':>11} {'hits':>9} {'misses':>9} {'hit%':>6}"
    lines = [head, "-" * len(head)]
    for st in stats:
        rate = "-" if st.hit_rate is None else f"{100 * st.hit_rate:.1f}"
        lines.append(f"{st.namespace:<12} {st.entries:>9} {_fmt_bytes(st.stored_bytes):>11} "
                     f"{_fmt_bytes(st.raw_bytes):>11} {st.hits:>9} {st.misses:>9} {rate:>6}")
    return "\n".join(lines)


def cmd_stats(args: argparse.Namespace) -> int:
    """Print entries, sizes and lifetime hits/misses per namespace."""
    stats = cache_stats(_path(args))
    rows = [stats[ns] for ns in sorted(stats) if args.namespace in (None, ns)]
    if args.format == "json":
        doc = {"path": str(_path(args)), "namespaces": {
            st.namespace: {"entries": st.entries, "stored_bytes": st.stored_bytes, "raw_bytes": st.raw_bytes,
                           "hits": st.hits, "misses": st.misses, "hit_rate": st.hit_rate} for st in rows}}
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(f"cache: {_path(args)}")
        print(_table(rows))
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    """Export a namespace, or only the keys a run used (``<run-dir>/cache_keys.txt``), to JSONL."""
    keys: list[KeyRef] | None = None
    if args.run_dir:
        key_file = Path(args.run_dir) / "cache_keys.txt"
        if key_file.exists():
            keys = read_key_list(key_file)
        else:
            log.warning("%s not found; exporting without a key filter", key_file)
    n = export_cache(_path(args), args.out, namespace=args.namespace, keys=keys)
    print(f"exported {n} entries to {args.out}")
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    """Load a JSONL export into the cache."""
    try:
        n = import_cache(_path(args), args.file)
    except (OSError, ValueError) as exc:
        print(f"cache import failed: {exc}", file=sys.stderr)
        return EXIT_JOB_ERRORS
    print(f"imported {n} entries into {_path(args)}")
    return EXIT_OK


def cmd_prune(args: argparse.Namespace) -> int:
    """Delete entries older than N days and/or of one namespace."""
    try:
        n = prune_cache(_path(args), older_than_days=args.older_than, namespace=args.namespace)
    except ValueError as exc:
        print(f"cache prune: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"pruned {n} entries from {_path(args)}")
    return EXIT_OK


def add_cache_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``cache`` with its ``stats|export|import|prune`` subcommands, each setting ``func``."""
    cache = subparsers.add_parser("cache", help="inspect, export, import or prune the result cache")
    sub = cache.add_subparsers(dest="cache_command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--cache", metavar="PATH", default=None,
                       help="cache file (default: $FASTEVAL_CACHE_DIR/cache.sqlite or ~/.cache/fasteval/)")
        p.add_argument("--namespace", metavar="NS", default=None, help="only this namespace")

    p = sub.add_parser("stats", help="entries, sizes and hit rates per namespace")
    common(p)
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("export", help="write entries to a portable JSONL file")
    common(p)
    p.add_argument("--out", metavar="FILE", required=True)
    p.add_argument("--run-dir", metavar="DIR", default=None,
                   help="only the keys listed in DIR/cache_keys.txt (all entries if that file is absent)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="load a JSONL export")
    common(p)
    p.add_argument("file", metavar="FILE")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("prune", help="delete old entries or a whole namespace")
    common(p)
    p.add_argument("--older-than", metavar="DAYS", type=float, default=None)
    p.set_defaults(func=cmd_prune)


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point (``python -m cache.cli stats``) until the main CLI wires it in."""
    parser = argparse.ArgumentParser(prog="fasteval")
    add_cache_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())


add_parser = add_cache_parser
"""The name ``fasteval.cli.main`` looks for in each of its command modules."""
