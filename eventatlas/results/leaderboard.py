"""The leaderboard rule, one for `eventatlas leaderboard` (and train-all / demo) and the HTML report.

A configuration is (task, dataset, split, setting, method, trained_on, representation, clustering,
variant, precision): the warehouse's ``leaderboard`` view already holds one row per configuration x metric over
seeds (mean, sample std, best, n_seeds; ``precision`` from the run's record, see ``run_precision`` in
warehouse/views.sql, so bf16 and fp32 runs of one config stay apart). :func:`tables` picks the metrics
per task (:func:`choose_metrics`), builds one table per (task, dataset) sorted by the first metric's
mean (its direction from ``metric_direction``) and marks the best mean per metric column. Scales and
the metrics shown first come from :mod:`eventatlas.metric_specs`, and ``Warehouse.migrate``
keeps ``metric_direction`` equal to the directions declared there.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Sequence

from ..evaluation.base import DEFAULT_METRICS
from ..metric_specs import is_fraction
from ..store.warehouse import Warehouse

# what tells configurations of one (task, dataset) apart, in the order they are shown
# (trained_on: where the scored model was trained; another dataset than the row's for a cross-dataset cell)
CONFIG_COLS = ("split", "setting", "method", "trained_on", "representation", "clustering", "variant", "precision")
IDENTITY = ("task", "dataset", *CONFIG_COLS)
MAX_ALL = 6  # a task with at most this many metrics shows them all


class UnknownName(ValueError):
    """A task, dataset or metric the warehouse has no leaderboard row for (the message lists the known ones)."""


def choose_metrics(task: str, present: Iterable[str], requested: Sequence[str] | None = None) -> list[str]:
    """The metrics a task's tables show: ``requested`` (those present), else the task's headline metrics
    first and, when the task has at most ``MAX_ALL`` metrics, all the others; else its first three."""
    present = sorted(set(present))
    if requested:
        return [m for m in requested if m in present]
    chosen = [m for m in DEFAULT_METRICS.get(task, ()) if m in present]
    if len(present) <= MAX_ALL:
        return chosen + [m for m in present if m not in chosen]
    return chosen or present[:3]


def distinct(wh: Warehouse, column: str, task: str | None = None, dataset: str | None = None) -> list[str]:
    """Values of ``column`` (task, dataset or metric) on the leaderboard, optionally within a task / dataset."""
    where = [f"{column} IS NOT NULL", *[c for c, v in (("task = ?", task), ("dataset = ?", dataset)) if v]]
    _, rows = wh.query_rows(f"SELECT DISTINCT {column} FROM leaderboard WHERE {' AND '.join(where)} ORDER BY 1",
                            [v for v in (task, dataset) if v])
    return [r[0] for r in rows]


def _check_known(wh: Warehouse, what: str, values: list[str], known: list[str]) -> None:
    from ..names import did_you_mean

    bad = [v for v in values if v not in known]
    if bad:
        hint = "".join(did_you_mean(v, known) for v in bad)
        raise UnknownName(f"unknown {what}{'s' if len(bad) > 1 else ''} {', '.join(map(repr, bad))}{hint}; known in "
                          f"{wh.path}: {', '.join(known) if known else '(none: no completed run has metrics)'}")


def _of_runs(run_ids: list[str]) -> tuple[str, list]:
    """A WHERE condition on the ``leaderboard`` view: configurations the runs ``run_ids`` have metrics for."""
    if not run_ids:
        return "false", []
    same = " AND ".join(f"m.{c} IS NOT DISTINCT FROM leaderboard.{c}" for c in (*IDENTITY, "metric") if c != "precision")
    return (f"EXISTS (SELECT 1 FROM metrics m JOIN run_precision p USING (run_id) WHERE m.run_id IN "
            f"({', '.join('?' * len(run_ids))}) AND {same} AND p.precision IS NOT DISTINCT FROM leaderboard.precision)",
            list(run_ids))


def tables(wh: Warehouse, *, task: str | None = None, dataset: str | None = None,
           metrics: Sequence[str] | None = None, run_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One table per (task, dataset): ``{"task", "dataset", "metrics", "best": {metric: best mean},
    "lower": {metrics where lower is better}, "rows": [(config tuple (CONFIG_COLS), {metric: leaderboard
    row})]}``, rows sorted by the first metric's mean, best first. ``run_ids``: only the configurations
    those runs produced (over all their seeds). An unknown ``task``/``dataset``/``metrics`` name raises
    :class:`UnknownName`."""
    if task:
        _check_known(wh, "task", [task], distinct(wh, "task"))
    if dataset:
        _check_known(wh, "dataset", [dataset], distinct(wh, "dataset", task))
    if metrics:
        _check_known(wh, "metric", list(metrics), distinct(wh, "metric", task, dataset))
    where, args = [], []
    for col, val in (("task", task), ("dataset", dataset)):
        if val:
            where.append(f"{col} = ?")
            args.append(val)
    if run_ids is not None:
        cond, ids = _of_runs(list(run_ids))
        where.append(cond)
        args += ids
    cols, rows = wh.query_rows(f"SELECT {', '.join(IDENTITY)}, metric, mean, std, n_seeds, best FROM leaderboard"
                               + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY task, dataset",
                               args)
    board = [dict(zip(cols, r)) for r in rows]
    _, low = wh.query_rows("SELECT metric FROM metric_direction WHERE NOT higher_is_better")
    return build(board, {r[0] for r in low}, metrics)


def build(board: list[dict[str, Any]], lower: set[str], requested: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """:func:`tables` from leaderboard rows already read (dicts with IDENTITY, metric, mean, std, n_seeds, best)."""
    by_task: dict[str, set[str]] = defaultdict(set)
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in board:
        by_task[r["task"]].add(r["metric"])
        groups[(r["task"], r["dataset"])].append(r)
    chosen = {t: choose_metrics(t, present, requested) for t, present in by_task.items()}
    out = []
    for (task, dataset), rows in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        ms = [m for m in chosen[task] if any(r["metric"] == m for r in rows)]
        if not ms:
            continue
        confs: dict[tuple, dict[str, dict]] = defaultdict(dict)
        for r in rows:
            if r["metric"] in ms:
                confs[tuple(r[c] for c in CONFIG_COLS)][r["metric"]] = r
        best: dict[str, float] = {}
        for m in ms:  # counts (n_clusters, stop epochs) are information, not a score: no best
            vals = [c[m]["mean"] for c in confs.values() if m in c and c[m]["mean"] is not None]
            if vals and (is_fraction(m) or m in lower):
                best[m] = min(vals) if m in lower else max(vals)
        first, sign = ms[0], (1 if ms[0] in lower else -1)
        order = sorted(confs.items(), key=lambda kv: (kv[1].get(first, {}).get("mean") is None,
                                                      sign * (kv[1].get(first, {}).get("mean") or 0.0),
                                                      [str(x) for x in kv[0]]))
        out.append({"task": task, "dataset": dataset, "metrics": ms, "best": best, "lower": set(lower), "rows": order})
    return out


# splits that choose a configuration rather than score it: a headline comes from another split when there is one
SELECTION_SPLITS = ("train", "dev", "valid", "validation")
# a headline's configuration, most telling first (a setting is a long description)
SHOWN_FIRST = ("representation", "clustering", "variant", "trained_on", "split", "precision", "setting", "method")


def headlines(boards: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per (method, task, dataset) of :func:`tables`' output: the method's best configuration by the
    table's headline metric (the first of the table's scores, not counts, that the method's rows have; scored on an
    evaluation split when the method has one), as ``{"method", "task", "dataset", "metric", "mean", "std",
    "n_seeds", "config": {column: value} (CONFIG_COLS that are set, method left out; SHOWN_FIRST order),
    "n_configs"}``; the
    value is the mean over seeds, as stored (fractions not x100). Sorted by method, task and dataset."""
    out = []
    for b in boards:
        by_method: dict[str, list] = defaultdict(list)
        for conf, cells in b["rows"]:  # rows are sorted best first by the table's first metric
            by_method[dict(zip(CONFIG_COLS, conf))["method"]].append((conf, cells))
        for method, rows in by_method.items():
            scored = [r for r in rows if dict(zip(CONFIG_COLS, r[0]))["split"] not in SELECTION_SPLITS] or rows
            metric = next((m for m in b["metrics"] if (is_fraction(m) or m in b["lower"])  # a score
                           and any((c.get(m) or {}).get("mean") is not None for _, c in scored)), None)
            if metric is None:
                continue
            sign = 1 if metric in b["lower"] else -1
            conf, cells = min((r for r in scored if (r[1].get(metric) or {}).get("mean") is not None),
                              key=lambda r: sign * r[1][metric]["mean"])
            cell = cells[metric]
            out.append({"method": method, "task": b["task"], "dataset": b["dataset"], "metric": metric,
                        "mean": cell["mean"], "std": cell.get("std"), "n_seeds": cell.get("n_seeds"),
                        "config": {k: v for k, v in sorted(zip(CONFIG_COLS, conf), key=lambda kv: SHOWN_FIRST.index(kv[0]))
                                   if k != "method" and v not in (None, "")},
                        # the configurations that have the metric (a row of only counts is not a contender)
                        "n_configs": sum((c.get(metric) or {}).get("mean") is not None for _, c in rows)})
    return sorted(out, key=lambda h: (str(h["method"]), str(h["task"]), str(h["dataset"])))
