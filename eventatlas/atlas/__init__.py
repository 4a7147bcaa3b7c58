"""The atlas: one queryable map linking every event-type inventory, with evidence.

Nodes are the types of every ingested inventory and the clusters of finished clustering runs
(:mod:`.inventory`); learned links come from the types' mentions through one small scorer each
(:mod:`.scorers`), calibrated (:mod:`.calibrate`) and scored against the hand mappings, which no scorer
reads (:mod:`.gold`); declared links (inventory relations, hand mappings) are kept apart
(:mod:`.declared`). :mod:`.build` builds it incrementally into Parquet parts, listed in its manifest
(:mod:`.manifest`), that the publish path lands (:func:`eventatlas.store.publishing.publish_atlas`);
:mod:`.export` writes CSV, JSON lines, SKOS or the offline HTML page (:mod:`.page`).
"""
