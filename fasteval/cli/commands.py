"""Every command of the ``fasteval`` CLI: its name, the module that implements it, its one-line help.

``fasteval --help`` lists them from this table alone, and ``fasteval status RUN`` imports only
``fasteval.cli.status``: a control client or a status check pays for its own imports, not for the
sweep's (``tests/cli/test_light_commands.py``; ``benchmarks/light_commands.py`` times them). Each
module's ``add_parser`` takes its commands' help from here (``cache.cli``, a side package, says the
same in its own words; a test compares them), so the two never disagree.
"""

from __future__ import annotations

COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("run", "fasteval.cli.run", "run (or resume) a sweep"),
    ("status", "fasteval.cli.status", "what is done and what remains in a run folder"),
    ("report", "fasteval.cli.report", "scores per model × suite × setting, mean ± std over seeds"),
    ("compare", "fasteval.cli.compare", "B against A on the jobs both ran: difference, CI, McNemar, verdict"),
    ("merge", "fasteval.cli.merge", "join shard run folders into one"),
    ("tool", "fasteval.cli.tool", "tools by hand"),
    ("rescore", "fasteval.cli.rescore", "re-judge finished trajectories without regenerating them"),
    ("score-file", "fasteval.cli.score_file", "score a reference harness's own output file, item by item"),
    ("data", "fasteval.cli.data", "benchmark data"),
    ("cache", "cache.cli", "inspect, export, import or prune the result cache"),
    ("slurm", "fasteval.cli.slurm", "run a sweep as a Slurm job array (submit, status, resume)"),
    ("index", "fasteval.cli.index", "the run folder's index (derived from records.jsonl)"),
    ("list", "fasteval.cli.catalog", "what a config may name: suites, tools, providers, sim policies"),
    ("config", "fasteval.cli.catalog", "config schema and checks"),
    ("view", "fasteval.cli.view", "browse run folders in a local web app (summary, jobs, trajectories)"),
    ("show", "fasteval.cli.view", "one trajectory in the terminal, its images saved as files"),
    ("suite", "fasteval.cli.prompts", "inspect a suite"),
    ("serve", "fasteval.cli.serve", "start one served model's servers as a sweep would (Ctrl-C stops them)"),
    ("batches", "fasteval.cli.batches", "a run's provider batches (batch mode)"),
    ("ctl", "fasteval.cli.ctl", "steer a running sweep: status, pause/resume, set limits, requeue, drain, cancel"),
    ("export", "fasteval.cli.export", "a run as inspect logs, ATIF, Parquet, or to MLflow / W&B / TensorBoard"),
    ("store", "fasteval.cli.store", "the results store shared across runs: ls, import, gc"),
)

HELP = {name: text for name, _, text in COMMANDS}
"""A command's one-line help, as ``fasteval --help`` lists it."""

MODULE = {name: module for name, module, _ in COMMANDS}
"""The module whose ``add_parser(sub)`` adds a command (some add two: list and config, view and show)."""
