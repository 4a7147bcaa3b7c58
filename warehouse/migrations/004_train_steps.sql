-- Training logs of trained methods, so learning curves compare in SQL. Written by the publish
-- path from runs/<run_id>/train_steps.parquet and train_evals.parquet (pyarrow schemas
-- eventatlas.warehouse.TRAIN_STEPS_SCHEMA / TRAIN_EVALS_SCHEMA: these columns minus run_id).
-- No index on run_id: a run's rows are inserted together, so DuckDB's min/max zone maps already
-- prune `WHERE run_id = ?`, and an index would block later ALTERs (see 003).

-- One row per optimiser step; `terms` holds the loss terms by name (e.g. {'contrastive': 0.7}).
-- `phase` names the training inside a run (one run may train several models, e.g. one per representation).
CREATE TABLE IF NOT EXISTS train_steps (
    run_id           VARCHAR NOT NULL,
    phase            VARCHAR,
    step             BIGINT NOT NULL,
    epoch            INTEGER,
    loss             DOUBLE,
    lr               DOUBLE,
    examples_per_s   DOUBLE,
    tokens_per_s     DOUBLE,
    padding_fraction DOUBLE,
    terms            MAP(VARCHAR, DOUBLE)
);

-- Dev / model-selection metrics measured during training (e.g. a silhouette per epoch).
CREATE TABLE IF NOT EXISTS train_evals (
    run_id VARCHAR NOT NULL,
    phase  VARCHAR,
    step   BIGINT,
    epoch  INTEGER,
    metric VARCHAR NOT NULL,
    value  DOUBLE
);
