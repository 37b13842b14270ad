"""``fasteval export``: a run folder as inspect logs, ATIF trajectories or Parquet, or sent to a tracker."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from fasteval.cli.commands import HELP
from fasteval.cli.common import print_json
from fasteval.core.exitcodes import EXIT_OK, EXIT_USAGE
from fasteval.core.terminal import clean


def add_parser(sub: Any) -> None:
    p = sub.add_parser("export", help=HELP["export"],
                       description="Export a run folder for the tools you already use (docs/export.md): "
                                   "--format inspect|atif|parquet writes files; --to mlflow|wandb|tensorboard "
                                   "sends the run's scores (each model × suite × setting, checkpoint series at their "
                                   "steps, the leaderboard) to an experiment tracker.")
    p.add_argument("run_dir")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--format", choices=("inspect", "atif", "parquet"), help="write files in this format")
    what.add_argument("--to", choices=("mlflow", "wandb", "tensorboard"), help="send the scores to this tracker")
    p.add_argument("--out", help="output file (parquet) or folder (inspect, atif); default: named after the run, "
                                 "in the current folder")
    p.add_argument("--model", action="append", help="only this model (repeatable)")
    p.add_argument("--suite", action="append", help="only this suite (repeatable)")
    p.add_argument("--rounds", action="store_true", help="parquet: also a table with one row per model request "
                                                         "(<out>.rounds.parquet)")
    p.add_argument("--no-images", action="store_true", help="inspect, atif: leave images out (a text placeholder "
                                                            "names each)")
    p.add_argument("--force", action="store_true", help="replace an existing --out")
    p.add_argument("--json", action="store_true", help="print what was written as JSON")
    t = p.add_argument_group("trackers (--to)")
    t.add_argument("--uri", help="mlflow: tracking URI (default: $MLFLOW_TRACKING_URI, else MLflow's own "
                                 "default, a SQLite database mlflow.db here)")
    t.add_argument("--experiment", help="mlflow: experiment name (default: the config's name)")
    t.add_argument("--project", help="wandb: project (default: the config's name)")
    t.add_argument("--entity", help="wandb: entity (team or user)")
    t.add_argument("--run-id", help="mlflow, wandb: log into this existing run (a training run's own)")
    t.add_argument("--mode", choices=("online", "offline"), help="wandb: offline writes a local run to sync later")
    t.add_argument("--logdir", help="tensorboard: the log folder (default: <run>-tensorboard here)")
    p.set_defaults(func=cmd_export)


def cmd_export(a: argparse.Namespace) -> int:
    from fasteval.runfolder.names import MANIFEST

    run_dir = Path(a.run_dir)
    if not (run_dir / MANIFEST).exists():
        print(f"error: {clean(run_dir)} is not a run folder (no manifest.json)", file=sys.stderr)
        return EXIT_USAGE
    if a.to:
        return _send(a, run_dir)
    from fasteval.view.export import Selection, export_run

    done = export_run(run_dir, a.format, Path(a.out) if a.out else None,
                      Selection(tuple(a.model or ()), tuple(a.suite or ())), rounds=a.rounds,
                      images=not a.no_images, force=a.force)
    if a.json:
        print_json(done)
        return EXIT_OK
    counts = ", ".join(f"{v} {k}" for k, v in done.items() if isinstance(v, int) and not isinstance(v, bool))
    partial = " (a partial run: not every planned job has a record)" if done["partial"] else ""
    print(clean(f"{' and '.join(done['out'])}: {counts}{partial}"), file=sys.stderr)
    return EXIT_OK


def _send(a: argparse.Namespace, run_dir: Path) -> int:
    from fasteval.config.log_to import TrackerSpec
    from fasteval.trackers.send import send_run

    spec = TrackerSpec(kind=a.to, uri=a.uri, experiment=a.experiment, project=a.project, entity=a.entity,
                       run_id=a.run_id, mode=a.mode, logdir=a.logdir or (f"{run_dir.resolve().name}-tensorboard"
                                                                         if a.to == "tensorboard" else None))
    done = send_run(run_dir, spec, models=tuple(a.model or ()), suites=tuple(a.suite or ()))
    if a.json:
        print_json(done)
        return EXIT_OK
    print(clean(f"{a.to}: {done['groups']} model × suite × setting scores, {done['metrics']} values"
                + (f", run {done['run_id']}" if done.get("run_id") else "")
                + (" (a partial run)" if done.get("partial") else "")), file=sys.stderr)
    return EXIT_OK
