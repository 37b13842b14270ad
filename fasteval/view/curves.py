"""Learning curves: a series' scores against the training step, from the report's rows.

A series (one model entry over a training run's checkpoints, fasteval/config/series.py) puts one
model per checkpoint in the run, named ``<series>@<step>``. Its curve is those models' report
rows ordered by step, per suite and setting: the mean over seeds, the between-seed spread as a
band (the lowest and the highest seed's mean score), tool calls per trajectory, and the best step. Nothing
here reads a record: the rows come from the run index, so a curve costs what the report costs.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from fasteval.config.series import SeriesSpec, series_of
from fasteval.core.cells import spreadsheet_text

CSV_COLUMNS = ("series", "suite", "setting", "step", "model", "mean", "std", "band_low", "band_high", "n_seeds",
               "n_ok", "n_error", "tool_calls_per_trajectory", "best")


def series_names(config: dict[str, Any]) -> list[str]:
    """The series entries of a config as written (a manifest's ``config``), in config order."""
    return [str(m["name"]) for m in config.get("models") or []
            if isinstance(m, dict) and "name" in m and SeriesSpec.of(m, Path(".")) is not None]


def learning_curves(rows: list[dict[str, Any]], config: dict[str, Any]) -> dict[str, Any]:
    """{series: {"curves": [{suite, setting, points: [...], best: {step, mean}}]}} from report rows."""
    names = set(series_names(config))
    grouped: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        found = series_of(str(r["model"]))
        if found is None or found[0] not in names:
            continue
        name, step = found
        seeds = r.get("seed_means") or []
        grouped.setdefault((name, r["suite"], r["setting"]), []).append({
            "step": step, "model": r["model"], "mean": r.get("mean"), "std": r.get("std"),
            "band": [min(seeds), max(seeds)] if seeds else None, "n_seeds": r.get("n_seeds"),
            "n_ok": r.get("n_ok"), "n_error": r.get("n_error"),
            "tool_calls_per_trajectory": r.get("tool_calls_per_trajectory")})
    out: dict[str, Any] = {n: {"curves": []} for n in sorted(names) if any(k[0] == n for k in grouped)}
    for (name, suite, setting), points in sorted(grouped.items()):
        points.sort(key=lambda p: p["step"])
        scored = [p for p in points if p["mean"] is not None]
        # the best step: the highest mean; a tie goes to the earlier step (cheaper to have trained)
        best = max(scored, key=lambda p: (p["mean"], -p["step"])) if scored else None
        out[name]["curves"].append({"suite": suite, "setting": setting, "points": points,
                                    "best": {"step": best["step"], "mean": best["mean"]} if best else None})
    return out


def curves_csv(name: str, series: dict[str, Any]) -> str:
    """One line per (suite, setting, step) of one series: for a user's own plotting."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for curve in series["curves"]:
        best = (curve.get("best") or {}).get("step")
        for p in curve["points"]:
            band = p["band"] or [None, None]
            # names are text a spreadsheet must not run; the numbers are ours, written as numbers
            w.writerow([*(spreadsheet_text(str(x)) for x in (name, curve["suite"], curve["setting"])), p["step"],
                        spreadsheet_text(str(p["model"])), _num(p["mean"]),
                        _num(p["std"]), _num(band[0]), _num(band[1]), p["n_seeds"], p["n_ok"], p["n_error"],
                        _num(p["tool_calls_per_trajectory"]), int(p["step"] == best)])
    return buf.getvalue()


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"
