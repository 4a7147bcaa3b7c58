-- Benchmark runs (flow and task `benchmark`, method = the benchmark's name): one row per compared
-- quantity, eventatlas (ours) against its baseline measured in the same run, with the machine it ran on.
-- Written by the publish path from runs/<run_id>/benchmarks.parquet (pyarrow schema
-- eventatlas.benchmarking.BENCHMARK_SCHEMA: these columns minus run_id).
-- ratio > 1: ours is better (ours / baseline when higher_is_better, baseline / ours otherwise).
-- No index on run_id (see 004: a run's rows are inserted together).
CREATE TABLE IF NOT EXISTS benchmarks (
    run_id           VARCHAR NOT NULL,
    benchmark        VARCHAR NOT NULL,
    setting          VARCHAR,
    quantity         VARCHAR NOT NULL,
    higher_is_better BOOLEAN NOT NULL,
    ours_label       VARCHAR,
    baseline_label   VARCHAR,
    ours             DOUBLE,
    baseline         DOUBLE,
    ratio            DOUBLE,
    ours_samples     DOUBLE[],
    baseline_samples DOUBLE[],
    "precision"      VARCHAR,
    device           VARCHAR,
    cpu_model        VARCHAR,
    gpu_model        VARCHAR,
    threads          INTEGER,
    loadavg_start    DOUBLE,
    loadavg_end      DOUBLE,
    versions         JSON,
    smoke            BOOLEAN NOT NULL
);
