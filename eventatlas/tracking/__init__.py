"""Run bookkeeping: what a run writes about itself on disk. Run records and their metrics (:mod:`.records`),
code version, device, seeds and run ids (:mod:`.runinfo`), the row layouts a record's files share with the
warehouse (:mod:`.tables`) and the plots a run leaves (:mod:`.plots`). It builds on data and
evaluation; the method families, the runner and the store build on it."""
