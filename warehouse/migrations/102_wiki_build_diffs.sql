-- issue 3: diff of a build against the previous one; language '*' carries the event counts
CREATE TABLE IF NOT EXISTS wiki_build_diffs (
    build_id VARCHAR NOT NULL,
    previous_build_id VARCHAR,
    language VARCHAR NOT NULL,
    events_added BIGINT,
    events_removed BIGINT,
    mentions_added BIGINT,
    mentions_removed BIGINT
);
