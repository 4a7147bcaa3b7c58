"""One declaration per metric (eventatlas.metric_specs) and everything derived from it: the
metrics shown first, the display scale, the run summary's columns, the warehouse's metric_direction table,
the leaderboard's "best"; and every evaluator's output checked against the declarations."""
from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from eventatlas.evaluation import METRIC_KEYS, RowKey, base
from eventatlas import metric_specs as ms
from eventatlas.metric_specs import MetricSpec, spec_for
from eventatlas.results import leaderboard, report
from eventatlas.store.warehouse import MIGRATIONS_DIR, Warehouse, sync_metric_direction

REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ hand-listed expectations
# (metric, shown x100, higher is better, a score the leaderboard marks a best for): what the leaderboard,
# the report and the CLI showed before the declarations existed
EXPECTED = [
    ("ari", True, True, True),
    ("bcubed_f", True, True, True),
    ("naming_mean_rank", False, False, True),  # a rank: as it is, the smallest is best
    ("linking_mean_rank", False, False, True),
    ("mean_rank", False, False, True),
    ("map_std", True, False, True),  # a spread of MAP: x100, the smallest is best
    ("n_clusters", False, True, False),  # a count: as it is, no best
    ("linking_unmapped_clusters", False, True, False),
    ("naming_n_clusters", False, True, False),
    ("n_queries_renamed", False, True, False),
    ("discovery_events", False, True, False),
    ("stop_epoch_paper", False, True, False),
    ("seconds_per_epoch", False, True, False),
    ("train_seconds", False, True, False),
    ("epochs_selected", False, True, False),  # a chosen setting: as it is, never ranked
    ("margin", False, True, False),
    ("recall@37", True, True, True),  # a family member no evaluator wrote yet
    ("hits@5_renamed", True, True, True),
    ("discovery_recall@16", True, True, True),
    ("transitive_spearman", True, True, True),
]


@pytest.mark.parametrize("metric, fraction, higher, score", EXPECTED)
def test_hand_listed_scale_and_direction(metric, fraction, higher, score):
    s = spec_for(metric)
    assert s is not None, metric
    assert (s.fraction, s.higher_is_better) == (fraction, higher)
    assert ms.scale(metric) == (100.0 if fraction else 1.0)
    # the leaderboard's best: the max / min of the means, or none for a count
    lower = {m for m, hib in ms.direction_rows() if not hib}
    board = [_lb("a", metric, 2.0), _lb("b", metric, 3.0)]
    (t,) = leaderboard.build(board, lower)
    assert t["best"] == ({metric: 3.0 if higher else 2.0} if score else {})


def test_an_undeclared_name_keeps_the_old_default():
    assert spec_for("made_up_metric") is None and spec_for("recall@0") is None and spec_for("recall@k") is None
    assert ms.scale("made_up_metric") == 100.0 and ms.higher_is_better("made_up_metric")


def test_default_metrics_are_derived_and_unchanged():
    assert base.DEFAULT_METRICS == ms.default_metrics() == {
        "induction": ("ari", "bcubed_f", "nmi"), "naming": ("naming_hits@1", "naming_mrr"),
        "linking": ("linking_hits@10", "linking_mrr"), "training": ("stop_epoch_paper", "stop_epoch_code"),
        "atlas": ("hits@1", "mrr"),
        "similarity": ("hard_sim_acc", "hard_sim_ext_acc", "transitive_spearman", "mcnc_acc"),
        "retrieval": ("map", "r_precision", "recall_all"), "grounding": ("recall_at_min", "strict_acc"),
        "detection": ("tc_f1", "ti_f1"), "discovery": ("new_f1", "new_precision", "new_recall")}
    assert leaderboard.choose_metrics("atlas", ["mrr", "n_queries", "hits@1", "hits@5"]) == [
        "hits@1", "mrr", "hits@5", "n_queries"]


def test_publish_summary_columns_and_table_keys_are_derived():
    pytest.importorskip("prefect")
    from tasks import publish

    assert publish.HEADLINE == ms.headline_metrics() == ("ari", "nmi", "bcubed_f", "purity_f", "fmi", "v_measure")
    assert publish.TABLE_KEYS == METRIC_KEYS
    rows = [{"task": "induction", "dataset": "d", "method": "m", "representation": "r", "clustering": "c",
             "variant": None, "seed": 0, "metric": m, "value": v}
            for m, v in (("ari", 0.456), ("nmi", 0.5), ("n_clusters", 7.0))]
    rows.append({**rows[0], "task": "naming", "metric": "naming_mrr", "value": 0.9})  # not an induction row
    md = publish.metrics_markdown(rows, "t").splitlines()
    # 0.456 x100 = 45.6; n_clusters is not a headline column; naming rows are left out
    assert md[2] == "| dataset | method | representation | clustering | variant | seed | ari | nmi |"
    assert md[4] == "| d | m | r | c |  | 0 | 45.6 | 50.0 |"
    assert md[-1] == "Values are x100."


def test_one_scale_function_for_cli_report_and_experiments():
    assert not hasattr(leaderboard, "scale") and report.scale is ms.scale and not hasattr(report, "_scale")
    assert not hasattr(base, "NOT_FRACTION")
    # hand-computed: 0.4567 x100 -> 45.7; a rank and a count as they are
    assert report._fmt(0.4567, "ari") == "45.7"
    assert report._fmt(2.5, "naming_mean_rank") == "2.5"
    assert report._fmt(12.0, "n_clusters") == "12.0"


def _lb(method, metric, mean, task="induction"):
    return {"task": task, "dataset": "d", "split": "test", "setting": None, "method": method, "trained_on": None,
            "representation": None, "clustering": None, "variant": None, "precision": None, "metric": metric,
            "mean": mean, "std": None, "n_seeds": 1, "best": mean}


# ------------------------------------------------------------------ the warehouse's metric_direction
@pytest.fixture
def wh(tmp_path) -> Warehouse:
    w = Warehouse(tmp_path / "wh.duckdb", lock_timeout=2)
    w.migrate()
    return w


def _directions(wh: Warehouse) -> list[tuple[str, bool]]:
    return wh.query_rows("SELECT metric, higher_is_better FROM metric_direction ORDER BY metric")[1]


def test_direction_table_equals_the_specs(wh):
    assert _directions(wh) == ms.direction_rows()
    assert [m for m, hib in ms.direction_rows() if not hib] == [
        "linking_mean_rank", "map_std", "mean_rank", "naming_mean_rank"]
    with wh.connect() as con:
        assert sync_metric_direction(con) == []  # already equal: nothing written


def test_a_wrong_row_is_put_back_and_an_undeclared_one_kept(wh):
    with wh.transaction() as con:
        con.execute("UPDATE metric_direction SET higher_is_better = false WHERE metric = 'ari'")
        con.execute("INSERT INTO metric_direction VALUES ('someones_loss', false)")
    wh.migrate()
    got = dict(_directions(wh))
    assert got.pop("someones_loss") is False
    assert sorted(got.items()) == ms.direction_rows()


def test_the_shipped_migrations_agree_with_the_specs():
    # 002, 005 and 006 seeded metric_direction by hand and still run on new warehouses first
    con = duckdb.connect()
    for p in sorted(MIGRATIONS_DIR.glob("*.sql")):
        if "metric_direction" in p.read_text(encoding="utf-8") and "INSERT" in p.read_text(encoding="utf-8"):
            con.execute(p.read_text(encoding="utf-8"))
    shipped = con.execute("SELECT metric, higher_is_better FROM metric_direction").fetchall()
    assert {m for m, _ in shipped} == {"mean_rank", "naming_mean_rank", "linking_mean_rank", "map_std"}
    assert all(spec_for(m) is not None and spec_for(m).higher_is_better == hib for m, hib in shipped)


def test_a_new_metric_is_one_entry(wh, monkeypatch):
    new = MetricSpec("steps_to_converge", ("training",), higher_is_better=False, fraction=False)
    monkeypatch.setattr(ms, "METRIC_SPECS", ms.METRIC_SPECS + (new,))
    assert ms.scale("steps_to_converge") == 1.0 and not ms.higher_is_better("steps_to_converge")
    wh.migrate()  # the publish path migrates first
    assert ("steps_to_converge", False) in _directions(wh)
    run = {"run_id": "r0", "method": "m", "status": "completed", "finished_at": "2026-01-01 00:00:00"}
    wh.publish(run, [{"task": "training", "dataset": "d", "method": "m", "metric": "steps_to_converge",
                      "value": v, "seed": s} for s, v in ((0, 30.0), (1, 20.0))])
    # hand-computed: over seeds 30 and 20, lower is better -> best 20, mean 25
    assert wh.query_rows("SELECT best, mean FROM leaderboard")[1] == [(20.0, 25.0)]


def test_leaderboard_best_and_shown_values_by_hand(wh):
    """Two configurations, three kinds of metric: a fraction, a rank, a count."""
    rows = {"a": {"ari": 0.40, "naming_mean_rank": 3.0, "n_clusters": 5.0},
            "b": {"ari": 0.60, "naming_mean_rank": 2.0, "n_clusters": 7.0}}
    for i, (method, vals) in enumerate(rows.items()):
        wh.publish({"run_id": f"r{i}", "method": method, "status": "completed", "finished_at": f"2026-01-0{i + 1}"},
                   [{"task": "naming" if m.startswith("naming") else "induction", "dataset": "d", "method": method,
                     "metric": m, "value": v, "seed": 0} for m, v in vals.items()])
    boards = {t["task"]: t for t in leaderboard.tables(wh)}
    ind, nam = boards["induction"], boards["naming"]
    assert ind["metrics"] == ["ari", "n_clusters"] and ind["best"] == {"ari": 0.60}  # a count has no best
    assert [conf[2] for conf, _ in ind["rows"]] == ["b", "a"]  # by ari, highest first
    assert nam["best"] == {"naming_mean_rank": 2.0} and [conf[2] for conf, _ in nam["rows"]] == ["b", "a"]
    # shown: ari 0.6 -> 60.0, the rank and the count as they are
    shown = {(m, conf[2]): report._fmt(c[m]["mean"], m) for t in boards.values() for conf, c in t["rows"] for m in c}
    assert shown == {("ari", "a"): "40.0", ("ari", "b"): "60.0", ("n_clusters", "a"): "5.0",
                     ("n_clusters", "b"): "7.0", ("naming_mean_rank", "a"): "3.0", ("naming_mean_rank", "b"): "2.0"}


# ------------------------------------------------------------------ the table itself
@pytest.mark.parametrize("extra, message", [
    (MetricSpec("ari", ("induction",)), "declared twice"),
    (MetricSpec("loss@{k}", ("training",), higher_is_better=False), "must be higher-is-better"),
    (MetricSpec("recall@5", ("retrieval",), fraction=False), "disagrees with its family"),
    (MetricSpec("brand_new_f1", ("induction",), headline=0), "headline position 0"),
    (MetricSpec("new_acc", ("similarity",), headline=9), "induction rows only"),
    (MetricSpec("new_acc", ("similarity",), default=0), "default position 0 of similarity"),
    (MetricSpec("new_acc", ()), "names no task"),
])
def test_a_contradictory_table_is_refused(extra, message):
    with pytest.raises(ValueError, match=message):
        ms._index(ms.METRIC_SPECS + (extra,))


def test_every_spec_names_known_tasks_and_is_frozen():
    assert {t for s in ms.METRIC_SPECS for t in s.tasks} <= set(base.TASKS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ms.METRIC_SPECS[0].fraction = False


def test_metric_rows_logs_an_undeclared_name_once(caplog, monkeypatch):
    monkeypatch.setattr(base, "_undeclared", set())
    with caplog.at_level(logging.WARNING, logger="eventatlas.evaluation.base"):
        for _ in range(2):
            rows = base.metric_rows({"ari": 0.5, "zz_new": 1.0}, task="induction", key=RowKey("d", "m", 0))
    assert [r["metric"] for r in rows] == ["ari", "zz_new"]
    assert [r.getMessage() for r in caplog.records] == [
        "metric 'zz_new' has no spec in eventatlas.metric_specs: shown x100, higher is better"]


# ------------------------------------------------------------------ every evaluator's output is declared
def _emitted() -> list[tuple[str, str]]:
    """(task, metric) of every evaluator run on a tiny hand-made case, plus the dict producers with the task
    their callers write them under."""
    from eventatlas.atlas import gold as G
    from eventatlas.evaluation.clustering import evaluate_partitions
    from eventatlas.evaluation.frames import frame_cluster_scores, frame_rows, ranking_recall
    from eventatlas.evaluation.grounding import evaluate_grounding
    from eventatlas.evaluation.naming import framenet_linking, type_naming
    from eventatlas.evaluation.pairs import evaluate_event_pairs
    from eventatlas.evaluation.retrieval import evaluate_retrieval, evaluate_scores
    from eventatlas.grounding.discovery import discovery_scores
    from eventatlas.schema import EVENT_PAIRS
    from test_evaluation import HAND_ROWS, dict_embed

    key = RowKey("d", "m", 0)
    rows = evaluate_partitions({(None, "agglomerative"): [0, 0, 1, 1]}, ["a", "a", "b", "c"], key=key)
    X = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]], dtype=np.float32)
    scores = {**frame_cluster_scores(["F", "F", "G", "G"], [0, 0, 1, 1]),
              **ranking_recall(X, ["F", "F", "G", "G"], ["v", "w", "v", "w"])}
    rows += frame_rows(scores, key=key)
    pairs = pa.Table.from_pylist(HAND_ROWS, schema=EVENT_PAIRS)
    rows += evaluate_event_pairs(pairs, dict_embed([]), key=key)
    rows += evaluate_event_pairs(pairs.slice(0, 6), dict_embed([]), key=key.replace(dataset="hard_ext"))
    rows += evaluate_retrieval(X[:2], X, [{0, 1}, {1}], ks=(1, 2), key=key)
    rows += evaluate_scores(np.array([[0.1, 0.9, 0.5]]), [{1}], ks=(1,), key=key)
    rows += evaluate_grounding([["x", "y"], ["y"]], [{"x"}, {"x", "y"}], scores=[[0.9, 0.2], [0.8]], threshold=0.5,
                               ks=(1, 2), key=key)
    topk = np.array([[1, 0, 4, 5], [1, 0, 2, 5], [2, 4, 0, 5], [3, 1, 5, 4], [3, 5, 2, 4]])
    disc = discovery_scores(topk, np.array([-1, 0, 0, 1, -1, -1, 0]), [1, 2, 3, 4, 6], ks=(1, 4))
    out = [(r["task"], r["metric"]) for r in rows] + [("grounding", m) for m in disc]
    names = np.eye(3)
    y = ["a"] * 2 + ["b"] * 2 + ["c"] * 2
    x = np.repeat(names, 2, axis=0) + 0.01
    out += [("naming", m) for m in type_naming(x, y, y, ["a", "b", "c"], names)[0]]
    valid = {"a": {"F1"}, "b": {"F2"}}
    out += [("linking", m) for m in framenet_linking(x, y, y, ["F1", "F2", "F3"], names, valid)[0]]
    out += [("linking", m) for m in framenet_linking(x, y, y, ["F1", "F2", "F3"], names, {})[0]]  # none mapped
    S = np.array([[0.9, 0.5], [0.2, 0.7]])
    for subset in ("", "_renamed"):  # eventatlas.atlas.link writes each link metric for the renamed queries too
        out += [("atlas", f"{m}{subset}") for m in G.link_metrics(S, {0: {0}, 1: {1}}, [0, 1])]
        out += [("atlas", f"{m}{subset}") for m in G.link_metrics(S, {}, [])]
    return out


def test_every_evaluator_emits_declared_metrics_only():
    emitted = _emitted()
    assert len({m for _, m in emitted}) > 60  # the walk reached every evaluator
    undeclared = sorted({m for _, m in emitted if spec_for(m) is None})
    assert not undeclared, f"add these to eventatlas.metric_specs.METRIC_SPECS: {undeclared}"
    wrong_task = sorted({(t, m) for t, m in emitted if t not in spec_for(m).tasks})
    assert not wrong_task, f"emitted under a task their spec does not list: {wrong_task}"


# Metrics written by method protocols too heavy to run here (they train), as (task, name); each name's
# literal (or the text that builds it) must still be in the source, so a rename shows up here.
PROTOCOL_FACTS = {
    "eventatlas/framedml/protocol.py": [("training", n) for n in ("alpha_one_step", "alpha_two_step", "margin",
                                                                   "epochs_selected", "seconds_per_epoch",
                                                                   "train_seconds")],
    "eventatlas/emr/protocol.py": [("retrieval", "map_std")],
    "eventatlas/atlas/link.py": [("atlas", "cluster_frame_share"), ("atlas", "n_clusters")],
}
BUILT_NAMES = {  # names assembled from parts: the source text that builds them -> what it builds
    "eventatlas/induction/evaluate.py": ('f"stop_epoch_{rule}"', [("training", "stop_epoch_paper"),
                                                                  ("training", "stop_epoch_code")]),
    "eventatlas/induction/training.py": ('for rule in ("paper", "code")', []),
    "eventatlas/atlas/link.py": ('("_renamed", ', [("atlas", "mrr_renamed"), ("atlas", "n_queries_renamed")]),
}


def test_protocol_facts_are_declared():
    facts = []
    for path, named in PROTOCOL_FACTS.items():
        src = (REPO / path).read_text(encoding="utf-8")
        assert all(f'"{n}"' in src for _, n in named), path
        facts += named
    for path, (text, built) in BUILT_NAMES.items():
        assert text in (REPO / path).read_text(encoding="utf-8"), path
        facts += built
    bad = [(t, n) for t, n in facts if spec_for(n) is None or t not in spec_for(n).tasks]
    assert not bad, f"declare in eventatlas.metric_specs.METRIC_SPECS: {bad}"
