"""Discover: the event types of a corpus nobody annotated, induced from its (detected) mentions, described
and linked to the inventories a user knows.

:func:`.describe.describe_types` turns a clustering of mention embeddings into type cards (size, top
triggers, the medoid sentences, a name); :func:`.run.discover` embeds a dataset's mentions, chooses the number
of types without labels (:mod:`eventatlas.cluster.selection`), clusters them, describes the clusters and links
them to known inventories with the atlas's evidence scorers (:func:`eventatlas.atlas.link.link_pair`).
"""
