-- A table cell whose setting or variant was picked on the same test set's labels (the YAML's
-- table.chosen_on_test): the pages mark it, so it is never read as a held-out figure.
ALTER TABLE experiment_table_cells ADD COLUMN IF NOT EXISTS chosen_on_test BOOLEAN DEFAULT false;
