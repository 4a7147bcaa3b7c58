-- Metric rows gain task, setting and variant (eventatlas.evaluation.base.METRIC_KEYS), and
-- `clustering` goes back to holding an algorithm name only.
--
-- Backfill of existing rows (eventatlas.warehouse.legacy_metric_keys is the Python twin, tested equal):
--   task:  metric naming_* -> naming, linking_* -> linking, stop_epoch_* -> training, else induction
--   clustering 'perfect' | 'stopping'       -> clustering NULL, variant = the text
--   clustering '<prefix>/<algorithm>'       -> clustering = algorithm, variant = prefix
--            (attn_dot/manifold, untuned:ft/agglomerative, ensemble3:attn_cos/manifold_sym, ...)
--   any other text (agglomerative, ...)     -> unchanged, variant NULL
--   setting: NULL (no protocol was recorded per row before)
--
-- The table is rebuilt instead of ALTERed: DuckDB 2.0 refuses ALTER COLUMN ... SET NOT NULL
-- (and RENAME / DROP / TYPE changes) on a table with an index ("Cannot alter entry ... because
-- there are entries that depend on it"), and refuses CREATE INDEX in a transaction that has
-- UPDATEd the table ("Cannot create index with outstanding updates"), so drop-index + ALTER +
-- UPDATE + re-index cannot run in one migration transaction. ADD COLUMN alone works but would
-- leave task nullable and the columns out of the contract's order. Views are not dependency-
-- tracked by DuckDB, so the old views survive the DROP until views.sql re-creates them.
CREATE TABLE metrics_003 (
    run_id         VARCHAR NOT NULL,
    task           VARCHAR NOT NULL,
    dataset        VARCHAR NOT NULL,
    split          VARCHAR,
    setting        VARCHAR,
    method         VARCHAR NOT NULL,
    representation VARCHAR,
    clustering     VARCHAR,
    variant        VARCHAR,
    metric         VARCHAR NOT NULL,
    value          DOUBLE,
    seed           INTEGER
);

INSERT INTO metrics_003
SELECT run_id,
       CASE WHEN starts_with(metric, 'naming_') THEN 'naming'
            WHEN starts_with(metric, 'linking_') THEN 'linking'
            WHEN starts_with(metric, 'stop_epoch_') THEN 'training'
            ELSE 'induction' END,
       dataset, split, NULL, method, representation,
       CASE WHEN clustering IN ('perfect', 'stopping') THEN NULL
            WHEN contains(clustering, '/') THEN nullif(regexp_extract(clustering, '([^/]*)$', 1), '')
            ELSE nullif(clustering, '') END,
       CASE WHEN clustering IN ('perfect', 'stopping') THEN clustering
            WHEN contains(clustering, '/') THEN nullif(regexp_extract(clustering, '^(.*)/[^/]*$', 1), '')
            ELSE NULL END,
       metric, value, seed
FROM metrics;

DROP TABLE metrics;  -- drops metrics_run_idx with it
ALTER TABLE metrics_003 RENAME TO metrics;
CREATE INDEX metrics_run_idx ON metrics (run_id);
