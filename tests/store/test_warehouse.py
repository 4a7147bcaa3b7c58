"""Warehouse: migrations, views over Parquet, leaderboard SQL, lock contention, rollback."""
from __future__ import annotations

import math
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest

from eventatlas.io import DatasetWriter
from eventatlas.store.warehouse import (
    Warehouse,
    WarehouseError,
    WarehouseLocked,
    discover_migrations,
)


@pytest.fixture
def wh(tmp_path) -> Warehouse:
    w = Warehouse(tmp_path / "wh.duckdb", lock_timeout=2)
    w.migrate()
    return w


def test_migrations_apply_once_in_order_and_are_recorded(tmp_path):
    w = Warehouse(tmp_path / "wh.duckdb")
    expected = [m.version for m in discover_migrations()]
    assert expected == sorted(expected) and 1 in expected
    assert w.migrate() == expected
    assert w.migrate() == []  # idempotent
    assert [v for v, _ in w.schema_versions()] == expected
    tables = {r[0] for r in w.query_rows("SELECT table_name FROM information_schema.tables")[1]}
    assert {"runs", "metrics", "artifacts", "train_steps", "train_evals", "schema_version", "leaderboard",
            "latest_metrics", "learning_curves"} <= tables


def test_migration_runner_orders_foreign_numbers_and_rejects_bad_names(tmp_path):
    mdir = tmp_path / "migrations"
    mdir.mkdir()
    # another engineer's 1NN file must run after ours, numerically not lexically per prefix
    (mdir / "101_wiki.sql").write_text("CREATE TABLE wiki_pages (id INTEGER); INSERT INTO t VALUES (101);")
    (mdir / "002_more.sql").write_text("INSERT INTO t VALUES (2);")
    (mdir / "001_base.sql").write_text("CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (1);")
    w = Warehouse(tmp_path / "x.duckdb", migrations_dir=mdir)
    assert w.migrate() == [1, 2, 101]
    assert [r[0] for r in w.query_rows("SELECT v FROM t ORDER BY rowid")[1]] == [1, 2, 101]
    (mdir / "102_broken.sql").write_text("CREATE TABLE half (v INTEGER); SELEC nonsense;")
    with pytest.raises(WarehouseError, match="102_broken.sql"):
        w.migrate()
    # the failed migration left nothing behind and is not recorded
    cols, rows = w.query_rows("SELECT count(*) FROM information_schema.tables WHERE table_name = 'half'")
    assert rows[0][0] == 0
    assert [v for v, _ in w.schema_versions()] == [1, 2, 101]
    (mdir / "102_broken.sql").unlink()
    (mdir / "7_bad.sql").write_text("SELECT 1;")
    with pytest.raises(WarehouseError, match="NNN_name.sql"):
        w.migrate()


def _run(run_id, finished, status="completed", method="untuned", seed=0):
    return {"run_id": run_id, "flow": "train-all", "task": "train", "method": method, "params": {"k_seen": 10},
            "code_version": "test", "data_fingerprints": {"d1": "abc"}, "seed": seed,
            "started_at": finished, "finished_at": finished, "status": status, "device": "cpu"}


def _m(dataset, rep, clus, metric, value, seed, method="untuned", task="induction", variant=None):
    return {"task": task, "dataset": dataset, "split": "train", "method": method, "representation": rep,
            "clustering": clus, "variant": variant, "metric": metric, "value": value, "seed": seed}


def test_leaderboard_on_hand_made_rows(wh):
    # seed 0 was run twice: only the later run (0.50) counts; seed 1 = 0.40; seed 2 = 0.30.
    wh.publish(_run("r-old", "2026-01-01 00:00:00"), [_m("d1", "trigger", "agglo", "ari", 0.90, 0)])
    wh.publish(_run("r0", "2026-01-02 00:00:00"), [_m("d1", "trigger", "agglo", "ari", 0.50, 0),
                                                   _m("d1", "trigger", "agglo", "mean_rank", 3.0, 0)])
    wh.publish(_run("r1", "2026-01-02 01:00:00", seed=1), [_m("d1", "trigger", "agglo", "ari", 0.40, 1),
                                                           _m("d1", "trigger", "agglo", "mean_rank", 2.0, 1)])
    wh.publish(_run("r2", "2026-01-02 02:00:00", seed=2), [_m("d1", "trigger", "agglo", "ari", 0.30, 2)])
    # a failed run never reaches the leaderboard
    wh.publish(_run("r-bad", "2026-01-03 00:00:00", status="failed"), [_m("d1", "trigger", "agglo", "ari", 0.99, 0)])
    wh.publish(_run("r3", "2026-01-02 03:00:00"), [_m("d1", "sentence", "agglo", "ari", 0.10, 0)])

    df = wh.query("SELECT * FROM leaderboard WHERE dataset = 'd1' ORDER BY representation, metric")
    ari = df[(df.representation == "trigger") & (df.metric == "ari")].iloc[0]
    assert ari["best"] == pytest.approx(0.50)
    assert ari["mean"] == pytest.approx(0.40)  # (0.5 + 0.4 + 0.3) / 3
    assert ari["std"] == pytest.approx(0.10)  # sample std of 0.5, 0.4, 0.3
    assert ari["n_seeds"] == 3
    mr = df[df.metric == "mean_rank"].iloc[0]
    assert mr["best"] == pytest.approx(2.0)  # lower is better
    assert mr["n_seeds"] == 2 and mr["mean"] == pytest.approx(2.5)
    sent = df[df.representation == "sentence"].iloc[0]
    assert sent["n_seeds"] == 1 and math.isnan(sent["std"])

    latest = wh.query("SELECT run_id, value FROM latest_metrics WHERE metric = 'ari' AND seed = 0 "
                      "AND representation = 'trigger'")
    assert latest.run_id.tolist() == ["r0"] and latest.value.tolist() == [0.5]


def test_publish_is_one_transaction_and_rolls_back(wh):
    wh.publish(_run("keep", "2026-01-01 00:00:00"), [_m("d1", "trigger", "agglo", "ari", 0.5, 0)],
               [{"kind": "assignments", "path": "/x.parquet", "rows": 3, "sha256": "00"}])
    # the artifact row violates NOT NULL (kind) after the run and metrics rows were inserted
    with pytest.raises(duckdb.ConstraintException):
        wh.publish(_run("bad", "2026-01-02 00:00:00"), [_m("d1", "trigger", "agglo", "ari", 0.7, 0)],
                   [{"kind": None, "path": "/y"}])
    assert wh.query("SELECT run_id FROM runs").run_id.tolist() == ["keep"]
    assert wh.query("SELECT count(*) AS n FROM metrics").n[0] == 1
    # a bad metric value fails before touching the database, naming the row
    with pytest.raises(WarehouseError, match="row 0: value 'abc'"):
        wh.publish(_run("bad2", "2026-01-02 00:00:00"), [_m("d1", "t", "a", "ari", "abc", 0)])
    # re-publishing a run replaces its rows instead of duplicating them
    wh.publish(_run("keep", "2026-01-01 00:00:00"), [_m("d1", "trigger", "agglo", "ari", 0.6, 0)])
    assert wh.query("SELECT value FROM metrics").value.tolist() == [0.6]
    assert wh.query("SELECT count(*) AS n FROM artifacts").n[0] == 0
    run = wh.query("SELECT params, data_fingerprints FROM runs").iloc[0]
    assert '"k_seen": 10' in run["params"] and "abc" in run["data_fingerprints"]


def test_contract_helpers_start_finish_add(wh):
    wh.start_run("r", flow="f", method="untuned", seed=3)
    assert wh.query("SELECT status FROM runs").status.tolist() == ["running"]
    assert wh.add_metrics("r", [_m("d", "trigger", "agglo", "ari", 0.25, 3)]) == 1
    wh.add_artifact("r", "metrics", "/tmp/m.parquet", rows=1, sha256="ff")
    wh.finish_run("r")
    assert wh.query("SELECT best FROM leaderboard").best.tolist() == [0.25]
    with pytest.raises(WarehouseError, match="no run 'nope'"):
        wh.finish_run("nope")


def test_views_over_parquet_refreshed_with_data_root(wh, tmp_path):
    root = tmp_path / "data"
    # before anything is ingested, the views exist and are empty with the schema's columns
    wh.refresh_views(root)
    df = wh.query("SELECT * FROM mentions")
    assert len(df) == 0 and "trigger_start" in df.columns and "labels" in df.columns
    for name, n in (("a", 2), ("b", 1)):
        with DatasetWriter(root / "datasets" / name, name, tables=["mentions", "event_types"]) as w:
            for i in range(n):
                s = f"Troops attacked the town {i}."
                w.write("mentions", {"mention_id": f"{name}{i}", "dataset": name, "doc_id": "d", "sentence": s,
                                     "trigger_start": 7, "trigger_end": 15, "trigger": s[7:15],
                                     "labels": ["Attack"], "split": "train"})
            w.write("event_types", {"dataset": name, "type_id": "Attack", "ontology": "ACE"})
            w.commit()
    views = wh.refresh_views(root)
    assert views["mentions"].endswith("*/mentions.parquet") and views["rejects"] == "(empty)"
    got = wh.query("SELECT dataset, count(*) AS n, min(trigger) AS t FROM mentions GROUP BY dataset ORDER BY dataset")
    assert got.dataset.tolist() == ["a", "b"] and got.n.tolist() == [2, 1] and set(got.t) == {"attacked"}
    assert wh.query("SELECT count(*) AS n FROM event_types").n[0] == 2
    assert wh.query("SELECT count(*) AS n FROM event_pairs").n[0] == 0
    # a new dataset shows up through the glob without another refresh
    with DatasetWriter(root / "datasets" / "c", "c", tables=["mentions"]) as w:
        w.write("mentions", {"mention_id": "c0", "dataset": "c", "doc_id": "d", "sentence": "x", "trigger_start": 0,
                             "trigger_end": 1, "trigger": "x"})
        w.commit()
    assert wh.query("SELECT count(*) AS n FROM mentions").n[0] == 4


def test_queries_are_read_only(wh):
    with pytest.raises(duckdb.Error, match="read-only"):
        wh.query("DELETE FROM runs")


def test_query_on_missing_warehouse_says_what_to_do(tmp_path):
    with pytest.raises(WarehouseError, match="does not exist yet.*eventatlas migrate"):
        Warehouse(tmp_path / "none.duckdb").query("SELECT 1")


HOLDER = textwrap.dedent(
    """
    import sys, duckdb
    con = duckdb.connect(sys.argv[1])  # read-write: holds the file lock
    print("locked", flush=True)
    sys.stdin.read()  # until the test closes our stdin (or kills us)
    con.close()
    """
)


def _hold_lock(path: Path) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == "locked"
    return p


def test_lock_held_by_another_process_gives_clear_error(wh):
    holder = _hold_lock(wh.path)
    try:
        t0 = time.monotonic()
        with pytest.raises(WarehouseLocked) as ei:
            Warehouse(wh.path, lock_timeout=1.0).publish(_run("x", "2026-01-01 00:00:00"))
        waited = time.monotonic() - t0
        msg = str(ei.value)
        assert f"warehouse {wh.path} is locked by another process (pid {holder.pid}?)" in msg
        assert "EVENTATLAS_WAREHOUSE" in msg
        assert 0.9 <= waited < 10  # retried for the bounded time, then gave up
    finally:
        holder.kill()
        holder.wait()


def test_lock_released_during_backoff_is_waited_for(wh):
    # The holder lets go only once the publisher has found the file locked (its on_wait hook), so the
    # publish always starts against a held lock and has to wait for its release, whatever the load
    # (a holder sleeping a fixed 1 s could let go before a slow publisher even tried).
    holder = _hold_lock(wh.path)
    waited_for = []

    def release(pid):
        waited_for.append(pid)
        holder.stdin.close()

    try:
        Warehouse(wh.path, lock_timeout=120, on_wait=release).publish(_run("after", "2026-01-01 00:00:00"))
    finally:
        holder.kill()
        holder.wait()
    assert waited_for == [str(holder.pid)]
    assert wh.query("SELECT run_id FROM runs").run_id.tolist() == ["after"]


def test_metric_rows_need_a_known_task_and_an_algorithm_only_clustering(wh):
    good = _m("d1", "trigger", "agglomerative", "ari", 0.5, 0)
    no_task = {**_m("d1", "trigger", "manifold", "nmi", 0.4, 0), "task": None}
    with pytest.raises(WarehouseError, match=r"metric row 1: 'task' is required \(one of induction, naming.*"
                                             r"dataset='d1', method='untuned'.*metric='nmi'"):
        wh.publish(_run("r", "2026-01-01 00:00:00"), [good, no_task])
    del no_task["task"]  # a row without the key at all reads the same
    with pytest.raises(WarehouseError, match="metric row 1: 'task' is required"):
        wh.add_metrics("r", [good, no_task])
    with pytest.raises(WarehouseError, match=r"metric row 0: unknown task 'clustering' \(known: induction"):
        wh.publish(_run("r", "2026-01-01 00:00:00"), [_m("d1", "trigger", "agglomerative", "ari", 0.5, 0,
                                                         task="clustering")])
    # the old combined form is refused with the split spelled out
    with pytest.raises(WarehouseError, match=r"clustering 'attn_dot/agglomerative' must be an algorithm name.*"
                                             r"clustering='agglomerative', variant='attn_dot'"):
        wh.publish(_run("r", "2026-01-01 00:00:00"), [_m("d1", "trigger", "attn_dot/agglomerative", "ari", 0.5, 0)])
    # nothing was written by any of the refused calls
    assert wh.query("SELECT count(*) AS n FROM runs").n[0] == 0
    assert wh.query("SELECT count(*) AS n FROM metrics").n[0] == 0


def test_leaderboard_keeps_tasks_settings_and_variants_apart(wh):
    rows = [
        _m("d1", "trigger", "agglomerative", "ari", 0.50, 0, method="ba", variant="attn_dot"),
        _m("d1", "trigger", "agglomerative", "ari", 0.30, 0, method="ba", variant="ft"),
        _m("d1", "trigger", "agglomerative", "ari", 0.20, 0, method="ba", variant="untuned:ft"),
        {**_m("d1", "trigger", "agglomerative", "ari", 0.10, 0, method="ba", variant="ft"), "setting": "k=5"},
        _m("d1", "trigger", None, "naming_mean_rank", 2.0, 0, method="ba", variant="perfect", task="naming"),
    ]
    wh.publish(_run("r0", "2026-01-01 00:00:00", method="ba"), rows)
    wh.publish(_run("r1", "2026-01-01 01:00:00", method="ba", seed=1), [
        _m("d1", "trigger", "agglomerative", "ari", 0.40, 1, method="ba", variant="attn_dot"),
        _m("d1", "trigger", None, "naming_mean_rank", 1.0, 1, method="ba", variant="perfect", task="naming")])
    lb = wh.query("SELECT * FROM leaderboard ORDER BY task, setting NULLS FIRST, variant")
    assert list(lb.columns[:11]) == ["task", "dataset", "split", "setting", "method", "trained_on", "representation",
                                     "clustering", "variant", "precision", "metric"]
    got = [(r.task, r.setting if isinstance(r.setting, str) else None, r.variant, r.best, r.n_seeds)
           for r in lb.itertuples()]
    assert got == [
        ("induction", None, "attn_dot", 0.50, 2),  # seeds 0 and 1: best 0.5, mean 0.45
        ("induction", None, "ft", 0.30, 1),
        ("induction", None, "untuned:ft", 0.20, 1),
        ("induction", "k=5", "ft", 0.10, 1),  # another protocol: its own line
        ("naming", None, "perfect", 1.0, 2),  # naming_mean_rank: lower is better (migration 005)
    ]
    assert lb.iloc[0]["mean"] == pytest.approx(0.45)
    # a model trained elsewhere and scored on d1 is its own cell, not another seed of the d1-trained one
    wh.publish(_run("r2", "2026-01-01 02:00:00", method="ba", seed=2), [
        {**_m("d1", "trigger", "agglomerative", "ari", 0.90, 2, method="ba", variant="attn_dot"), "trained_on": "d2"}])
    lb = wh.query("SELECT trained_on, best, n_seeds FROM leaderboard WHERE variant = 'attn_dot' ORDER BY 1 NULLS FIRST")
    assert [(r.trained_on if isinstance(r.trained_on, str) else None, r.best, r.n_seeds) for r in lb.itertuples()] \
        == [(None, 0.50, 2), ("d2", 0.90, 1)]


def test_map_std_is_lower_is_better(wh):
    # emr's map_std is a spread over repetitions: the leaderboard's best over seeds is the smallest
    for seed, (m, sd) in enumerate([(0.60, 0.05), (0.55, 0.02), (0.50, 0.09)]):
        wh.publish(_run(f"r{seed}", f"2026-01-01 0{seed}:00:00", method="emr", seed=seed),
                   [_m("d1", "window4", None, "map", m, seed, method="emr", task="retrieval"),
                    _m("d1", "window4", None, "map_std", sd, seed, method="emr", task="retrieval")])
    best = dict(wh.query_rows("SELECT metric, best FROM leaderboard WHERE method = 'emr'")[1])
    assert best == {"map": pytest.approx(0.60), "map_std": pytest.approx(0.02)}
    _, d = wh.query_rows("SELECT higher_is_better FROM metric_direction WHERE metric = 'map_std'")
    assert d == [(False,)]


def _steps(n, loss0=1.0):
    import pyarrow as pa

    from eventatlas.tracking.tables import TRAIN_STEPS_SCHEMA

    return pa.Table.from_pylist(
        [{"phase": "main", "step": i, "epoch": i // 2, "loss": loss0 / (i + 1), "lr": 1e-4, "examples_per_s": 50.0, "tokens_per_s": 900.0,
          "padding_fraction": 0.25, "terms": {"contrastive": loss0 / (i + 1) - 0.1, "mlm": 0.1}} for i in range(n)],
        schema=TRAIN_STEPS_SCHEMA)


def test_publish_train_logs_and_republish_replaces_every_table(wh, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from eventatlas.tracking.tables import TRAIN_EVALS_SCHEMA

    run = {**_run("t0", "2026-01-01 00:00:00", method="ba"), "params": {"dataset": "onto", "epochs": 2}}
    evals = [{"step": 1, "epoch": 0, "metric": "silhouette", "value": 0.21},
             {"step": 3, "epoch": 1, "metric": "silhouette", "value": 0.34}]
    wh.publish(run, [_m("onto", "trigger", "agglomerative", "ari", 0.5, 0, method="ba")],
               [{"kind": "metrics", "path": "/m.parquet"}], train_steps=_steps(4), train_evals=evals)
    other = {**_run("t1", "2026-01-01 00:00:00", method="ba", seed=1), "params": {"dataset": "onto"}}
    wh.publish(other, [], train_steps=_steps(2, loss0=2.0))
    st = wh.query("SELECT step, epoch, loss, terms['contrastive'] AS c, terms['mlm'] AS mlm FROM train_steps "
                  "WHERE run_id = 't0' ORDER BY step")
    assert st.step.tolist() == [0, 1, 2, 3] and st.epoch.tolist() == [0, 0, 1, 1]
    assert st.loss.tolist() == pytest.approx([1.0, 0.5, 1 / 3, 0.25])
    assert st.c.tolist() == pytest.approx([0.9, 0.4, 1 / 3 - 0.1, 0.15]) and set(st.mlm) == {0.1}
    ev = wh.query("SELECT step, epoch, metric, value FROM train_evals WHERE run_id = 't0' ORDER BY step")
    assert ev.values.tolist() == [[1, 0, "silhouette", 0.21], [3, 1, "silhouette", 0.34]]
    # the learning_curves view names method, dataset (from params) and seed
    lc = wh.query("SELECT run_id, method, dataset, seed, count(*) AS n, min(loss) AS lo FROM learning_curves "
                  "GROUP BY ALL ORDER BY run_id")
    assert lc.values.tolist() == [["t0", "ba", "onto", 0, 4, 0.25], ["t1", "ba", "onto", 1, 2, 1.0]]

    # re-publish t0 from Parquet files (what a trainer writes) with 3 steps and no evals: replaced, not added
    p = tmp_path / "train_steps.parquet"
    pq.write_table(_steps(3, loss0=3.0), p)
    wh.publish(run, [_m("onto", "trigger", "agglomerative", "ari", 0.6, 0, method="ba")], train_steps=str(p))
    counts = wh.query("SELECT (SELECT count(*) FROM runs WHERE run_id = 't0') AS runs, "
                      "(SELECT count(*) FROM metrics WHERE run_id = 't0') AS metrics, "
                      "(SELECT count(*) FROM artifacts WHERE run_id = 't0') AS artifacts, "
                      "(SELECT count(*) FROM train_steps WHERE run_id = 't0') AS steps, "
                      "(SELECT max(loss) FROM train_steps WHERE run_id = 't0') AS max_loss, "
                      "(SELECT count(*) FROM train_evals WHERE run_id = 't0') AS evals, "
                      "(SELECT count(*) FROM train_steps WHERE run_id = 't1') AS other_steps").iloc[0]
    assert counts.to_dict() == {"runs": 1, "metrics": 1, "artifacts": 0, "steps": 3, "max_loss": 3.0, "evals": 0,
                                "other_steps": 2}
    # and evals from a Parquet file land too
    pq.write_table(pa.Table.from_pylist(evals, schema=TRAIN_EVALS_SCHEMA), tmp_path / "train_evals.parquet")
    wh.publish(run, [], train_evals=tmp_path / "train_evals.parquet")
    assert wh.query("SELECT count(*) AS n FROM train_evals WHERE run_id = 't0'").n[0] == 2
    assert wh.query("SELECT count(*) AS n FROM train_steps WHERE run_id = 't0'").n[0] == 0


def test_bad_train_logs_are_refused_before_writing(wh, tmp_path):
    import pyarrow as pa

    run = _run("b", "2026-01-01 00:00:00")
    with pytest.raises(WarehouseError, match=r"train_steps: columns must be exactly \[.*\]; missing \['terms'\]"):
        wh.publish(run, train_steps=_steps(2).drop_columns(["terms"]))
    with pytest.raises(WarehouseError, match=r"train_evals: unexpected columns \['split'\]"):
        wh.publish(run, train_evals=[{"step": 1, "metric": "silhouette", "value": 0.2, "split": "dev"}])
    with pytest.raises(WarehouseError, match="train_evals: column 'metric' has 1 null value"):
        wh.publish(run, train_evals=[{"step": 1, "value": 0.2}])
    bad_type = _steps(1).set_column(3, "loss", pa.array(["high"]))  # 0 phase, 1 step, 2 epoch, 3 loss
    with pytest.raises(WarehouseError, match="train_steps: columns do not fit"):
        wh.publish(run, train_steps=bad_type)
    with pytest.raises(WarehouseError, match=r"train_steps \(.*nope.parquet\): file not found"):
        wh.publish(run, train_steps=tmp_path / "nope.parquet")
    assert wh.query("SELECT count(*) AS n FROM runs").n[0] == 0


def test_leaderboard_keeps_precisions_apart(wh):
    """The precision a run recorded is part of its configuration: bf16 and fp32 runs of one config are two
    leaderboard rows (not one mean over both); "auto" alone (nothing resolved) is no precision."""
    from eventatlas.results.leaderboard import tables

    def run(run_id, seed, params):
        return {**_run(run_id, f"2026-01-0{seed + 1} 00:00:00", seed=seed), "params": params}

    resolved = lambda p: {"config": {"train": {"precision": "auto"}}, "train": {"trigger": {"precision": p}}}  # noqa: E731
    for seed, v in ((0, 0.50), (1, 0.40)):
        wh.publish(run(f"bf{seed}", seed, resolved("bf16")), [_m("d1", "trigger", "agglo", "ari", v, seed)])
    wh.publish(run("fp0", 0, {"config": {"encoder": {"precision": "fp32"}}}), [_m("d1", "trigger", "agglo", "ari", 0.20, 0)])
    wh.publish(run("au0", 0, {"config": {"encoder": {"precision": "auto"}}}), [_m("d1", "trigger", "agglo", "ari", 0.10, 0)])
    _, rows = wh.query_rows("SELECT precision, n_seeds, mean FROM leaderboard ORDER BY precision NULLS FIRST")
    assert [(p, n, round(m, 4)) for p, n, m in rows] == [(None, 1, 0.1), ("bf16", 2, 0.45), ("fp32", 1, 0.2)]
    (t,) = tables(wh)  # the CLI's and the report's rule: three configurations, best mean first
    assert [conf[-1] for conf, _ in t["rows"]] == ["bf16", "fp32", None] and t["best"] == {"ari": pytest.approx(0.45)}
    (t,) = tables(wh, run_ids=["fp0"])  # only the configuration that run produced
    assert [conf[-1] for conf, _ in t["rows"]] == ["fp32"]
