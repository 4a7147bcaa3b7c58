-- Core run bookkeeping: one row per run, long-form metrics, produced artifacts.
-- Applied once by eventatlas.warehouse.Warehouse.migrate(); recorded in schema_version.
CREATE TABLE IF NOT EXISTS runs (
    run_id            VARCHAR PRIMARY KEY,
    flow              VARCHAR,
    task              VARCHAR,
    method            VARCHAR,
    params            JSON,
    code_version      VARCHAR,
    data_fingerprints JSON,
    seed              INTEGER,
    started_at        TIMESTAMP,
    finished_at       TIMESTAMP,
    status            VARCHAR NOT NULL,   -- running | completed | failed
    device            VARCHAR,
    error             VARCHAR
);

CREATE TABLE IF NOT EXISTS metrics (
    run_id         VARCHAR NOT NULL,
    dataset        VARCHAR NOT NULL,
    split          VARCHAR,
    method         VARCHAR NOT NULL,
    representation VARCHAR,
    clustering     VARCHAR,
    metric         VARCHAR NOT NULL,
    value          DOUBLE,
    seed           INTEGER
);
CREATE INDEX IF NOT EXISTS metrics_run_idx ON metrics (run_id);

CREATE TABLE IF NOT EXISTS artifacts (
    run_id  VARCHAR NOT NULL,
    kind    VARCHAR NOT NULL,
    path    VARCHAR NOT NULL,
    "rows"  BIGINT,
    sha256  VARCHAR
);
