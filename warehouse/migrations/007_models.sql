-- Trained models as artifacts (eventatlas.modeling.saved): one row per saved model, and the metric
-- rows of a model applied to another dataset say where it was trained.
--
-- metrics.trained_on: the dataset the scored model was trained on. NULL for a model trained on
-- nothing (the untuned baseline); equal to `dataset` for a run scored on its own data; another
-- dataset for a cross-dataset cell (`eventatlas evaluate RUN --on DATASET`), whose `dataset` is the
-- data it was evaluated on. ADD COLUMN works on the indexed table (see 003 for what does not).
ALTER TABLE metrics ADD COLUMN IF NOT EXISTS trained_on VARCHAR;

CREATE TABLE IF NOT EXISTS models (
    run_id         VARCHAR PRIMARY KEY,   -- the run that trained (and saved) it
    method         VARCHAR NOT NULL,
    trained_on     VARCHAR,
    path           VARCHAR NOT NULL,      -- runs/<run_id>/model
    size_bytes     BIGINT,
    parts          VARCHAR[],             -- "encoder" and the head names
    representation VARCHAR,
    precision      VARCHAR,
    base_model     VARCHAR,
    code_version   VARCHAR,
    created_at     TIMESTAMP
);
