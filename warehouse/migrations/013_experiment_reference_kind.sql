-- What a reference figure is (the YAML's references[].source.kind): 'paper', a published figure, or 'own', the
-- project's own earlier measurement. The pages label them differently, so an earlier run of ours is never shown
-- as a paper's figure. Rows written before this column are papers (the only kind there was).
ALTER TABLE experiment_references ADD COLUMN IF NOT EXISTS kind VARCHAR DEFAULT 'paper';
