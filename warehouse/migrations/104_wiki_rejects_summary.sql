-- issue 3: how many items each filter dropped, per build
CREATE TABLE IF NOT EXISTS wiki_rejects_summary (
    build_id VARCHAR NOT NULL,
    reason VARCHAR NOT NULL,
    n BIGINT NOT NULL
);
