"""Results layer: what runs leave behind and where it goes. Run records and their metrics (:mod:`.records`,
:mod:`.runinfo`), plots (:mod:`.plots`), the DuckDB warehouse (:mod:`.warehouse`) and its one writer
(:mod:`.publishing`), leaderboards and reports (:mod:`.leaderboard`, :mod:`.report`, :mod:`.experiments`),
benchmark records (:mod:`.benchmarking`). It builds on data, modeling and evaluation; the method families,
the atlas, the runner and the CLI build on it."""
