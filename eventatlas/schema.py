"""The common eventatlas schema: one module, versioned.

Every reader writes these tables; every downstream step reads them. Character
offsets are end-exclusive and index into the field they name (``sentence`` for
trigger/scope/argument spans), so ``sentence[trigger_start:trigger_end] == trigger``
always holds; the readers' tests check it on real data.

Bump ``SCHEMA_VERSION`` on any change (minor: a table or column added, which older datasets lack; major:
an incompatible one); manifests record it.
"""
from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = "1.1"  # 1.1: the sentences table (added; 1.0 datasets simply have none)

ONTOLOGIES = ("ACE", "MAVEN", "FrameNet", "KAIROS", "Wikidata", "OntoEvent", "other")

DOCUMENTS = pa.schema(
    [
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("title", pa.string()),
        pa.field("language", pa.string()),
        pa.field("text", pa.string()),  # full text when the source has one
        pa.field("sentences", pa.list_(pa.string())),  # sentence list when the source is pre-split
        pa.field("source", pa.string()),  # file / URL the document came from
        pa.field("split", pa.string()),
        pa.field("extra", pa.string()),  # JSON object for source-specific fields
    ]
)

# A document's sentences with their tokens (the text reader: a plain corpus split by a sentence splitter).
# ``start``/``end`` index the document's ``text`` (``text[start:end] == sentence text``); token offsets index the
# sentence text, end-exclusive (``text[token_starts[i]:token_ends[i]]`` is token i).
SENTENCES = pa.schema(
    [
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("sent_idx", pa.int32(), nullable=False),  # position in the document's sentence list
        pa.field("text", pa.string(), nullable=False),
        pa.field("start", pa.int32(), nullable=False),
        pa.field("end", pa.int32(), nullable=False),
        pa.field("token_starts", pa.list_(pa.int32())),
        pa.field("token_ends", pa.list_(pa.int32())),
        pa.field("split", pa.string()),
    ]
)

ARGUMENT = pa.struct(
    [
        pa.field("role", pa.string()),
        pa.field("text", pa.string()),
        pa.field("start", pa.int32()),  # offsets into the mention's sentence; null when outside it
        pa.field("end", pa.int32()),
        pa.field("entity_id", pa.string()),
    ]
)

MENTIONS = pa.schema(
    [
        pa.field("mention_id", pa.string(), nullable=False),  # stable hash, see io.stable_id
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("sent_idx", pa.int32()),
        pa.field("sentence", pa.string(), nullable=False),
        pa.field("trigger_start", pa.int32(), nullable=False),
        pa.field("trigger_end", pa.int32(), nullable=False),
        pa.field("trigger", pa.string(), nullable=False),
        pa.field("scope_start", pa.int32()),  # optional mention scope / extent in the sentence
        pa.field("scope_end", pa.int32()),
        pa.field("language", pa.string()),
        pa.field("split", pa.string()),
        pa.field("labels", pa.list_(pa.string())),  # event type ids; empty/null when unlabeled
        pa.field("arguments", pa.list_(ARGUMENT)),
        pa.field("extra", pa.string()),  # JSON object (e.g. FrameNet LU, ACE event id, coref)
    ]
)

EVENT_TYPES = pa.schema(
    [
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("type_id", pa.string(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("definition", pa.string()),
        pa.field("parent_id", pa.string()),  # hierarchy; null at roots
        pa.field("ontology", pa.string()),
        pa.field("extra", pa.string()),
    ]
)

TYPE_RELATIONS = pa.schema(
    [
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("source_id", pa.string(), nullable=False),
        pa.field("target_id", pa.string(), nullable=False),
        pa.field("relation", pa.string(), nullable=False),  # e.g. Inheritance, Subframe, Precedes, maps_to
        pa.field("source_ontology", pa.string()),
        pa.field("target_ontology", pa.string()),
    ]
)

MENTION_RELATIONS = pa.schema(
    [
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("source_mention_id", pa.string(), nullable=False),
        pa.field("target_mention_id", pa.string(), nullable=False),
        pa.field("relation", pa.string(), nullable=False),  # CAUSE, BEFORE, coref, ...
    ]
)

SVO = pa.struct([pa.field("subj", pa.string()), pa.field("verb", pa.string()), pa.field("obj", pa.string())])

# Event-similarity benchmarks (Weber hard similarity, transitive sentence similarity,
# MCNC): items are (s, v, o) events, not mentions in running text.
EVENT_PAIRS = pa.schema(
    [
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("task", pa.string(), nullable=False),  # hard_similarity | transitive_similarity | mcnc
        pa.field("block_id", pa.string()),  # groups the pairs compared against each other
        pa.field("event_a", SVO),
        pa.field("event_b", SVO),
        pa.field("score", pa.float64()),  # gold similarity / label
        pa.field("extra", pa.string()),
    ]
)

REJECTS = pa.schema(
    [
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("source", pa.string()),  # file name
        pa.field("location", pa.string()),  # line / record / offset
        pa.field("reason", pa.string(), nullable=False),  # short machine-friendly code
        pa.field("detail", pa.string()),  # human-readable explanation
        pa.field("raw", pa.string()),  # offending input, truncated
    ]
)

# Run logs of trained methods (not dataset tables): what a trainer writes to
# runs/<run_id>/train_steps.parquet and train_evals.parquet; the warehouse tables of migration 004
# add run_id. ``phase`` names the training inside a run (e.g. the representation, or a
# pre-training stage), since one run may train several models.
TRAIN_STEPS = pa.schema(
    [
        pa.field("phase", pa.string()),
        pa.field("step", pa.int64(), nullable=False),  # optimizer steps so far
        pa.field("epoch", pa.int32()),
        pa.field("loss", pa.float64()),
        pa.field("lr", pa.float64()),  # the first parameter group's (the encoder's)
        pa.field("examples_per_s", pa.float64()),
        pa.field("tokens_per_s", pa.float64()),
        pa.field("padding_fraction", pa.float64()),
        pa.field("terms", pa.map_(pa.string(), pa.float64())),  # loss terms, other groups' lr
    ]
)
TRAIN_EVALS = pa.schema(
    [
        pa.field("phase", pa.string()),
        pa.field("step", pa.int64()),
        pa.field("epoch", pa.int32()),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("value", pa.float64()),
    ]
)

# What a benchmark run writes to runs/<run_id>/benchmarks.parquet (eventatlas.store.benchmarking; the warehouse
# table of migration 008 adds run_id). One row per compared quantity (e.g. sentences/s at fp32).
# ``ratio`` > 1 means ours is better: ours / baseline for a higher-is-better quantity (throughput),
# baseline / ours otherwise (seconds, MB).
BENCHMARKS = pa.schema(
    [
        pa.field("benchmark", pa.string(), nullable=False),  # the script's name without bench_ (encode, cluster)
        pa.field("setting", pa.string()),  # the case within it (fp32, exact-20000, ...)
        pa.field("quantity", pa.string(), nullable=False),  # what is compared, with its unit (sentences/s, s, MB)
        pa.field("higher_is_better", pa.bool_(), nullable=False),
        pa.field("ours_label", pa.string()),
        pa.field("baseline_label", pa.string()),
        pa.field("ours", pa.float64()),  # the figure reported (median over repeats where repeated)
        pa.field("baseline", pa.float64()),
        pa.field("ratio", pa.float64()),
        pa.field("ours_samples", pa.list_(pa.float64())),  # every repeat's figure, as measured
        pa.field("baseline_samples", pa.list_(pa.float64())),
        pa.field("precision", pa.string()),
        pa.field("device", pa.string()),
        pa.field("cpu_model", pa.string()),
        pa.field("gpu_model", pa.string()),
        pa.field("threads", pa.int32()),
        pa.field("loadavg_start", pa.float64()),  # 1-minute load average: other jobs on the machine
        pa.field("loadavg_end", pa.float64()),
        pa.field("versions", pa.string()),  # JSON {library: version}
        pa.field("smoke", pa.bool_(), nullable=False),  # a smoke run's figures mean nothing
    ]
)

TABLES: dict[str, pa.Schema] = {
    "documents": DOCUMENTS,
    "sentences": SENTENCES,
    "mentions": MENTIONS,
    "event_types": EVENT_TYPES,
    "type_relations": TYPE_RELATIONS,
    "mention_relations": MENTION_RELATIONS,
    "event_pairs": EVENT_PAIRS,
    "rejects": REJECTS,
}


# The atlas's link rows (one schema for declared and learned links; :mod:`eventatlas.atlas.links` writes them).
LINKS = pa.schema([
    pa.field("source", pa.string(), nullable=False),    # node ids (<inventory>::<type_id>)
    pa.field("target", pa.string(), nullable=False),
    pa.field("relation", pa.string(), nullable=False),  # declared: the source's name; learned: RELATIONS
    pa.field("kind", pa.string(), nullable=False),      # declared | learned
    pa.field("score", pa.float64()),                    # calibrated (learned only)
    pa.field("raw_score", pa.float64()),                # the scorer's own value (learned only)
    pa.field("rank", pa.int32()),                       # the target's rank for this source (learned only)
    pa.field("method", pa.string()),                    # scorer, or where a declared link comes from
    pa.field("calibration", pa.string()),               # rank | isotonic:... (learned only)
    pa.field("encoder", pa.string()),
    pa.field("run_id", pa.string()),                    # the clustering run of a cluster node, if any
    pa.field("provenance", pa.string()),
    pa.field("evidence_mention_ids", pa.list_(pa.string())),
])

# A discovered type's card (:mod:`eventatlas.discover`): one row per type of a ``discover`` run.
DISCOVERED_TYPES = pa.schema([
    pa.field("type_id", pa.string(), nullable=False), pa.field("name", pa.string()),
    pa.field("size", pa.int64()), pa.field("triggers", pa.list_(pa.string())),
    pa.field("trigger_counts", pa.list_(pa.int64())), pa.field("cohesion", pa.float64()),
    pa.field("examples", pa.list_(pa.string())), pa.field("medoid_ids", pa.list_(pa.string())),
    pa.field("majority_label", pa.string()),
    # the strongest link to a known inventory (by the config's novelty scorer's raw score) and the verdict:
    # new when that score is under the threshold (None when nothing was linked)
    pa.field("best_link", pa.string()), pa.field("best_score", pa.float64()), pa.field("new", pa.bool_()),
])

# Views over runs' own Parquet files (``<data>/runs/<glob>``), each with the run's id (the rows' own ``run_id``
# where the schema has one, else the run directory's name, as the first column).
RUN_VIEWS: dict[str, tuple[str, pa.Schema]] = {
    "discovered_types": ("discover-*/types.parquet", DISCOVERED_TYPES),
    "discovered_links": ("discover-*/links.parquet", LINKS),
}
