-- The naming and linking evaluations report their mean rank under task-prefixed names: lower is
-- better there too (the leaderboard's best is the minimum over seeds).
INSERT OR IGNORE INTO metric_direction VALUES ('naming_mean_rank', false), ('linking_mean_rank', false);
