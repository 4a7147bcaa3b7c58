"""Upgrading a warehouse written before metric rows carried task / setting / variant (migration 003),
with every form the old overloaded ``clustering`` column took in real warehouses."""
from __future__ import annotations

import shutil

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eventatlas.store.warehouse import MIGRATIONS_DIR, Warehouse, WarehouseError, discover_migrations
from eventatlas.tracking.tables import METRICS_SCHEMA, legacy_metric_keys

# The views as they were before 003 (what an old warehouse file holds).
OLD_VIEWS = """
CREATE OR REPLACE VIEW latest_metrics AS
SELECT m.run_id, m.dataset, m.split, m.method, m.representation, m.clustering,
       m.metric, m.value, m.seed, r.finished_at, r.code_version
FROM metrics m JOIN runs r USING (run_id) WHERE r.status = 'completed'
QUALIFY row_number() OVER (
    PARTITION BY m.dataset, m.split, m.method, m.representation, m.clustering, m.metric, m.seed
    ORDER BY r.finished_at DESC NULLS LAST, m.run_id DESC) = 1;
CREATE OR REPLACE VIEW leaderboard AS
SELECT l.dataset, l.split, l.method, l.representation, l.clustering, l.metric,
       CASE WHEN coalesce(d.higher_is_better, true) THEN max(l.value) ELSE min(l.value) END AS best,
       avg(l.value) AS mean, stddev_samp(l.value) AS std, count(*) AS n_seeds, max(l.finished_at) AS last_finished_at
FROM latest_metrics l LEFT JOIN metric_direction d USING (metric)
GROUP BY l.dataset, l.split, l.method, l.representation, l.clustering, l.metric, d.higher_is_better;
"""

# (run_id, method, split, clustering as written by untuned / batch_attention (and its old post-hoc tool), metric, seed)
# -> expected (task, clustering, variant), written out by hand.
ROWS = [
    ("u0", "untuned", "all", "agglomerative", "ari", 0, ("induction", "agglomerative", None)),
    ("u0", "untuned", "all", "manifold", "ari", 0, ("induction", "manifold", None)),
    ("u0", "untuned", "all", "manifold_sym", "bcubed_f", 0, ("induction", "manifold_sym", None)),
    ("u0", "untuned", "all", "affinity", "mean_rank", 0, ("induction", "affinity", None)),
    ("u1", "untuned", "all", "agglomerative", "ari", 1, ("induction", "agglomerative", None)),
    ("b0", "batch_attention", "unseen", "attn_dot/agglomerative", "ari", 0, ("induction", "agglomerative", "attn_dot")),
    ("b0", "batch_attention", "unseen", "attn_dot_neg/manifold", "ari", 0, ("induction", "manifold", "attn_dot_neg")),
    ("b0", "batch_attention", "unseen", "attn_cos/manifold_sym", "nmi", 0, ("induction", "manifold_sym", "attn_cos")),
    ("b0", "batch_attention", "unseen", "ft/affinity", "ari", 0, ("induction", "affinity", "ft")),
    ("b0", "batch_attention", "unseen", "untuned:ft/agglomerative", "ari", 0,
     ("induction", "agglomerative", "untuned:ft")),
    ("b0", "batch_attention", "unseen", "untuned:ft/manifold_sym", "naming_mrr", 0,
     ("naming", "manifold_sym", "untuned:ft")),
    ("b0", "batch_attention", "unseen", "attn_dot/agglomerative", "naming_hits@1", 0,
     ("naming", "agglomerative", "attn_dot")),
    ("b0", "batch_attention", "unseen", "attn_cos/manifold", "linking_hits@10", 0, ("linking", "manifold", "attn_cos")),
    ("b0", "batch_attention", "unseen", "perfect", "naming_mean_rank", 0, ("naming", None, "perfect")),
    ("b0", "batch_attention", "unseen", "perfect", "linking_mrr", 0, ("linking", None, "perfect")),
    ("b0", "batch_attention", "unseen", "perfect", "avg_cluster_purity", 0, ("induction", None, "perfect")),
    ("b0", "batch_attention", "unseen", "stopping", "stop_epoch_paper", 0, ("training", None, "stopping")),
    ("b0", "batch_attention", "unseen", "stopping", "stop_epoch_code", 0, ("training", None, "stopping")),
    ("b1", "batch_attention", "unseen", "attn_dot/agglomerative", "ari", 1, ("induction", "agglomerative", "attn_dot")),
    ("e0", "batch_attention", "unseen", "ensemble3:attn_dot/manifold", "ari", -1,
     ("induction", "manifold", "ensemble3:attn_dot")),
    ("e0", "batch_attention", "unseen", "ensemble3:ft/agglomerative", "bcubed_f", -1,
     ("induction", "agglomerative", "ensemble3:ft")),
    ("x0", "external", "all", None, "ari", 0, ("induction", None, None)),
]


@pytest.fixture
def old_warehouse(tmp_path) -> Warehouse:
    """A warehouse as it was before 003: migrations 001 + 002, the old views, old-style rows."""
    old = tmp_path / "old"
    (old / "migrations").mkdir(parents=True)
    for name in ("001_core.sql", "002_metric_direction.sql"):
        shutil.copy(MIGRATIONS_DIR / name, old / "migrations" / name)
    (old / "views.sql").write_text(OLD_VIEWS)
    wh = Warehouse(tmp_path / "wh.duckdb", migrations_dir=old / "migrations")
    assert wh.migrate() == [1, 2]
    with wh.transaction() as con:
        for i, run_id in enumerate(dict.fromkeys(r[0] for r in ROWS)):
            con.execute("INSERT INTO runs (run_id, method, params, seed, finished_at, status) VALUES (?, ?, ?, ?, ?, ?)",
                        [run_id, next(r[1] for r in ROWS if r[0] == run_id), '{"dataset": "onto"}',
                         next(r[5] for r in ROWS if r[0] == run_id), f"2026-01-01 00:00:0{i}", "completed"])
        # each row's value is its index: the key to compare it before and after
        con.executemany("INSERT INTO metrics VALUES (?, 'onto', ?, ?, 'trigger', ?, ?, ?, ?)",
                        [[r[0], r[2], r[1], r[3], r[4], float(i), r[5]] for i, r in enumerate(ROWS)])
    assert len(wh.query("SELECT * FROM latest_metrics")) == len(ROWS)  # the old views work on the old file
    return wh


def test_migration_003_backfills_task_clustering_variant_without_losing_rows(old_warehouse):
    wh = Warehouse(old_warehouse.path)  # the real migrations directory
    # every migration after 002, in order (the list grows with new migrations; 003-006 are this test's)
    applied = wh.migrate()
    assert applied == [m.version for m in discover_migrations() if m.version > 2] and applied[:4] == [3, 4, 5, 6]
    assert wh.migrate() == []
    _, got = wh.query_rows("SELECT value, run_id, task, dataset, split, setting, method, representation, clustering, "
                           "variant, metric, seed FROM metrics ORDER BY value")
    assert len(got) == len(ROWS)
    for (i, *rest), (run_id, method, split, _, metric, seed, (task, clustering, variant)) in zip(got, ROWS):
        assert tuple(rest) == (run_id, task, "onto", split, None, method, "trigger", clustering, variant, metric, seed)
        # the Python twin (for old run records) maps the same way
        assert legacy_metric_keys(ROWS[int(i)][3], metric) == {"task": task, "clustering": clustering,
                                                                "variant": variant}
    # clustering now holds an algorithm name or NULL, nothing else
    _, algos = wh.query_rows("SELECT DISTINCT clustering FROM metrics WHERE clustering IS NOT NULL ORDER BY 1")
    assert [a for (a,) in algos] == ["affinity", "agglomerative", "manifold", "manifold_sym"]

    # the table has the contract's columns in order, task NOT NULL, and its run_id index back
    cols, rows = wh.query_rows("SELECT column_name, is_nullable FROM information_schema.columns "
                               "WHERE table_name = 'metrics' ORDER BY ordinal_position")
    assert [c for c, _ in rows] == METRICS_SCHEMA.names
    assert dict(rows)["task"] == "NO"
    _, idx = wh.query_rows("SELECT index_name, table_name FROM duckdb_indexes()")
    assert ("metrics_run_idx", "metrics") in idx
    with pytest.raises(duckdb.ConstraintException, match="task"):
        with wh.transaction() as con:
            con.execute("INSERT INTO metrics (run_id, dataset, method, metric) VALUES ('z', 'onto', 'm', 'ari')")


def test_migrated_views_group_by_task_and_variant(old_warehouse):
    wh = Warehouse(old_warehouse.path)
    wh.migrate()
    lb = wh.query("SELECT * FROM leaderboard")
    assert list(lb.columns[:11]) == ["task", "dataset", "split", "setting", "method", "trained_on", "representation",
                                     "clustering", "variant", "precision", "metric"]
    # rows from before migration 007 say nothing of where a model was trained
    assert wh.query_rows("SELECT count(*) FROM metrics WHERE trained_on IS NOT NULL")[1] == [(0,)]
    # every migrated row is its own configuration except untuned/agglomerative/ari (seeds 0 + 1) and
    # batch_attention attn_dot/agglomerative/ari (seeds 0 + 1)
    assert len(lb) == len(ROWS) - 2
    by_task = wh.query("SELECT task, count(*) AS n FROM leaderboard GROUP BY task ORDER BY task")
    assert dict(zip(by_task.task, by_task.n)) == {"induction": 13, "linking": 2, "naming": 3, "training": 2}
    _, two = wh.query_rows("SELECT method, variant, n_seeds, best, mean FROM leaderboard WHERE n_seeds = 2 "
                           "ORDER BY method")
    # values are the row indexes: untuned agglomerative ari rows 0 and 4; attn_dot agglomerative ari rows 5 and 18
    assert two == [("batch_attention", "attn_dot", 2, 18.0, 11.5), ("untuned", None, 2, 4.0, 2.0)]
    # naming_mean_rank is lower-is-better (005): a single seed, so best is its value either way; check the table
    _, d = wh.query_rows("SELECT metric FROM metric_direction WHERE NOT higher_is_better ORDER BY 1")
    assert [m for (m,) in d] == ["linking_mean_rank", "map_std", "mean_rank", "naming_mean_rank"]
    assert wh.query("SELECT count(*) AS n FROM learning_curves").n[0] == 0


def test_a_failing_003_leaves_the_old_table_intact(old_warehouse, tmp_path):
    # 003 drops and renames tables: a failure after those statements must roll all of them back
    mdir = tmp_path / "mig"
    shutil.copytree(MIGRATIONS_DIR, mdir)
    m003 = mdir / "003_metric_task_setting_variant.sql"
    m003.write_text(m003.read_text() + "\nSELECT error('broken on purpose');\n")
    wh = Warehouse(old_warehouse.path, migrations_dir=mdir)
    with pytest.raises(WarehouseError, match="003_metric_task_setting_variant.sql failed.*broken on purpose"):
        wh.migrate()
    assert [v for v, _ in wh.schema_versions()] == [1, 2]
    _, cols = wh.query_rows("SELECT column_name FROM information_schema.columns WHERE table_name = 'metrics' "
                            "ORDER BY ordinal_position")
    assert [c for (c,) in cols] == ["run_id", "dataset", "split", "method", "representation", "clustering", "metric",
                                    "value", "seed"]
    assert wh.query("SELECT count(*) AS n FROM metrics").n[0] == len(ROWS)
    _, tables = wh.query_rows("SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'metrics%'")
    assert tables == [("metrics",)]
    # and the real migration then upgrades it
    assert Warehouse(old_warehouse.path).migrate()[:3] == [3, 4, 5]


def test_old_run_records_republish_with_the_same_mapping(tmp_path):
    """A metrics.parquet written before rows had a task (no task column) is upgraded on load."""
    from eventatlas.tracking.records import load_metrics

    old = pa.table({"run_id": ["b0"] * 3, "dataset": ["onto"] * 3, "split": ["unseen"] * 3,
                    "method": ["batch_attention"] * 3, "representation": ["trigger"] * 3,
                    "clustering": ["attn_cos/manifold", "perfect", "stopping"],
                    "metric": ["ari", "linking_mrr", "stop_epoch_code"], "value": [0.4, 0.5, 2.0],
                    "seed": pa.array([0, 0, 0], pa.int32())})
    pq.write_table(old, tmp_path / "metrics.parquet")
    rows = load_metrics({"metrics_path": str(tmp_path / "metrics.parquet")})
    assert [(r["task"], r["clustering"], r["variant"], r["metric"]) for r in rows] == [
        ("induction", "manifold", "attn_cos", "ari"), ("linking", None, "perfect", "linking_mrr"),
        ("training", None, "stopping", "stop_epoch_code")]
    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.migrate()
    wh.publish({"run_id": "b0", "status": "completed"}, rows)
    assert wh.query("SELECT count(*) AS n FROM leaderboard").n[0] == 3
