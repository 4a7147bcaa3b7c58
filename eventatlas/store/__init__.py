"""Persistence: the DuckDB warehouse (:mod:`.warehouse`), its one writer (:mod:`.publishing`: run records,
wiki builds, atlas builds, declared experiments), the read-only SQL session (:mod:`.sql_session`) and the
harness that records and lands benchmark runs (:mod:`.benchmarking`). It builds on the run records of
:mod:`eventatlas.tracking` and sits above the method families, whose builds it lands."""
