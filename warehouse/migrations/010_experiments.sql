-- Declared experiments (experiments/*.yaml, eventatlas.experiments): what each experiment is, which runs
-- answer which of its cells, the table it shows and the reference figures it is compared with. Written by
-- the publish path (eventatlas.publishing.publish_experiment) when an experiment runs; `mode` is 'full' or
-- 'quick' (the shipped-samples form), so quick runs never mix with the real table.

CREATE TABLE IF NOT EXISTS experiments (
    experiment   VARCHAR NOT NULL,
    mode         VARCHAR NOT NULL,          -- full | quick
    title        VARCHAR,
    description  VARCHAR,
    goal         VARCHAR,                   -- the project's goal for the table, as prose
    goal_rule    JSON,                      -- within / beats (eventatlas.experiments.spec.Goal)
    diagnosis    VARCHAR,                   -- prose from the YAML explaining a shortfall
    spec_sha256  VARCHAR,                   -- digest of the resolved declaration
    recorded_at  TIMESTAMP,
    PRIMARY KEY (experiment, mode)
);

-- A run carries the experiment and cell it answers: one row per (experiment, mode, cell, seed). A run
-- reused by a later experiment run (same method, config, data fingerprint, code version) keeps its row.
CREATE TABLE IF NOT EXISTS experiment_runs (
    experiment   VARCHAR NOT NULL,
    mode         VARCHAR NOT NULL,
    cell         VARCHAR NOT NULL,
    seed         INTEGER NOT NULL,
    run_id       VARCHAR NOT NULL,
    reused       BOOLEAN,                   -- found finished instead of run again
    recorded_at  TIMESTAMP,
    PRIMARY KEY (experiment, mode, cell, seed)
);

-- The table: one row per (row, column) with its filter over the metric columns (NULL = any).
CREATE TABLE IF NOT EXISTS experiment_table_cells (
    experiment     VARCHAR NOT NULL,
    mode           VARCHAR NOT NULL,
    row_label      VARCHAR NOT NULL,
    col_label      VARCHAR NOT NULL,
    row_order      INTEGER,
    col_order      INTEGER,
    task           VARCHAR,
    dataset        VARCHAR,
    split          VARCHAR,
    setting        VARCHAR,
    method         VARCHAR,
    trained_on     VARCHAR,
    representation VARCHAR,
    clustering     VARCHAR,
    variant        VARCHAR,
    metric         VARCHAR NOT NULL,
    cell           VARCHAR,                 -- only the runs of this experiment cell
    scale          DOUBLE,                  -- 100 for fractions (shown x100), 1 for counts and ranks
    PRIMARY KEY (experiment, mode, row_label, col_label)
);

-- The paper's figures, as shown (fractions x100), loaded from the YAML when the experiment runs.
CREATE TABLE IF NOT EXISTS experiment_references (
    experiment  VARCHAR NOT NULL,
    row_label   VARCHAR NOT NULL,
    col_label   VARCHAR NOT NULL,
    value       DOUBLE NOT NULL,
    paper       VARCHAR NOT NULL,
    table_ref   VARCHAR,
    setting     VARCHAR
);
