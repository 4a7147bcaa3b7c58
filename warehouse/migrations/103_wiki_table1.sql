-- issue 3: statistics comparable to Table 1 of the hierarchical event grounding paper
CREATE TABLE IF NOT EXISTS wiki_table1 (
    build_id VARCHAR NOT NULL,
    split VARCHAR NOT NULL,      -- train | dev | test | wikinews | all (per-language rows)
    language VARCHAR NOT NULL,   -- 'all' or a language code
    mentions BIGINT,
    events BIGINT,
    trees BIGINT,
    avg_children DOUBLE,
    max_depth BIGINT
);
