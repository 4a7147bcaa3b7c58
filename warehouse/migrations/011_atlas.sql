-- The atlas (eventatlas.atlas): nodes = every type of every inventory and every induced cluster of a
-- run; links = declared relations (kind 'declared', no score, with provenance) and learned scores
-- (kind 'learned', relation 'learned:<scorer>'), kept apart by kind and relation.
-- Rows belong to a `part` (one unit of the incremental build, eventatlas.atlas.build): publishing
-- replaces the rows of the parts whose fingerprint changed and nothing else.
CREATE TABLE IF NOT EXISTS atlas_parts (
    part        VARCHAR PRIMARY KEY,   -- nodes/<inventory> | declared/<inventory> | learned/<src>__<tgt>__<encoder>
    kind        VARCHAR NOT NULL,
    fingerprint VARCHAR NOT NULL,
    sha256      VARCHAR,
    "rows"      BIGINT,
    path        VARCHAR,
    landed_at   TIMESTAMP
);

CREATE TABLE IF NOT EXISTS atlas_nodes (
    part                 VARCHAR NOT NULL,
    node_id              VARCHAR NOT NULL,  -- <inventory>::<type_id>
    inventory            VARCHAR NOT NULL,  -- a dataset name, or run:<run_id>/<rep>/<algo>
    kind                 VARCHAR NOT NULL,  -- type | cluster
    type_id              VARCHAR NOT NULL,
    name                 VARCHAR,
    definition           VARCHAR,
    parent_id            VARCHAR,
    ontology             VARCHAR,
    dataset              VARCHAR,           -- whose mentions are the evidence
    run_id               VARCHAR,
    n_mentions           BIGINT,
    evidence_mention_ids VARCHAR[]
);

CREATE TABLE IF NOT EXISTS atlas_links (
    part                 VARCHAR NOT NULL,
    source               VARCHAR NOT NULL,
    target               VARCHAR NOT NULL,
    relation             VARCHAR NOT NULL,
    kind                 VARCHAR NOT NULL,  -- declared | learned
    score                DOUBLE,            -- calibrated; NULL for declared links
    raw_score            DOUBLE,
    rank                 INTEGER,
    method               VARCHAR,
    calibration          VARCHAR,
    encoder              VARCHAR,
    run_id               VARCHAR,
    provenance           VARCHAR,
    evidence_mention_ids VARCHAR[],
    CHECK ((kind = 'declared' AND score IS NULL AND raw_score IS NULL AND relation NOT LIKE 'learned:%')
           OR (kind = 'learned' AND relation LIKE 'learned:%'))
);
