-- Which metrics are "lower is better" (the leaderboard's best value is the minimum for these).
CREATE TABLE IF NOT EXISTS metric_direction (
    metric          VARCHAR PRIMARY KEY,
    higher_is_better BOOLEAN NOT NULL
);
INSERT OR IGNORE INTO metric_direction VALUES ('mean_rank', false);
