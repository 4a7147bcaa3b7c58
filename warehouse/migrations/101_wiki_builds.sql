-- issue 3: one row per versioned wikievents build
CREATE TABLE IF NOT EXISTS wiki_builds (
    build_id VARCHAR PRIMARY KEY,
    dataset VARCHAR NOT NULL,
    recorded_at TIMESTAMP,
    backend JSON,          -- backend info: dump dates/files/fingerprint or API endpoints
    params JSON,           -- thresholds, seed, workers
    n_events BIGINT,
    n_mentions BIGINT,
    previous_build_id VARCHAR
);
