"""Why an input record was set aside: the one vocabulary of reject reasons (the ``reason`` column of every
dataset's ``rejects`` table and of ``eventatlas rejects``). A reader or builder uses a name from here; the test
suite checks every reason a rejects table receives against it, so two readers cannot name one problem twice.

The two general ones: ``bad_record`` is a record whose shape is wrong (not an object, the wrong number of
fields, a structure a reader cannot walk); ``bad_field`` is one field of a well-formed record with a wrong type
or value. Everything else names its problem exactly."""
from __future__ import annotations

REJECT_REASONS: dict[str, str] = {
    # the shape of a record or of one field
    "bad_record": "the record's shape is wrong: not an object, the wrong number of fields, an unwalkable structure",
    "bad_field": "one field has a wrong type or value (e.g. a type name that is not a name, a list that is not one)",
    "missing_field": "a required field is absent or empty",
    "bad_json": "a line is not valid JSON",
    "malformed_line": "a dump line is not one JSON object",
    "truncated_line": "the last line of a dump is cut short",
    "bad_offsets": "a span's offsets are not integers inside the text or tokens",
    "bad_offset": "an annotation's offset is not an integer",
    "bad_span": "a span is empty or reversed",
    "offset_mismatch": "the text at a span's offsets differs from the trigger the record gives",
    "token_count_mismatch": "the tokens do not cover the text they belong to",
    "bad_tokens": "the tokens cannot be aligned to the sentence",
    "bad_sentence": "a sentence entry cannot be read",
    "bad_argument": "an argument (frame element) is not a span inside the text",
    "bad_pair": "an event pair lacks an event or a label",
    "bad_tuple": "an event tuple does not have its fields",
    "bad_score": "a similarity score is not a number",
    "bad_time": "a Wikidata time value cannot be read",
    "bad_type_entry": "an event-type entry cannot be read",
    "incomplete_block": "a block of lines misses a member",
    "crosses_sentence": "a mention spans two sentences",
    "anchor_outside_scope": "an ACE anchor lies outside its ldc_scope",
    "missing_source": "the source text a file refers to is not beside it",
    # a document of a plain corpus (the text reader) that is not usable text
    "empty_document": "a document whose text is empty or only whitespace",
    "undecodable_text": "bytes that are not UTF-8, nor UTF-8 or UTF-16 with a byte-order mark (the detail names the "
                        "byte offset); never guessed",
    "binary_file": "a file with NUL bytes: binary, not text",
    "oversized_record": "a document or line longer than the record cap (EVENTATLAS_MAX_RECORD_BYTES), skipped "
                        "without being held",
    "unreadable_file": "a file that cannot be read as its format (e.g. a damaged Parquet file); the rest is read",
    # repeats and conflicts
    "duplicate_document": "a document id read before (the repeat is dropped with its mentions)",
    "duplicate_type": "an event-type id read before",
    "duplicate_mention": "a mention id read before",
    "duplicate_window": "a context window already taken from the same paragraph",
    "duplicate_english_label": "several candidates share one English label",
    "conflicting_type": "one mention carries two different types",
    "conflicting_instance": "an entity is both a class and an instance in the hierarchy",
    # what a reader or builder leaves out on purpose
    "unknown_type": "a type the ontology does not define (kept without a definition)",
    "unknown_frame": "a frame with no frame file",
    "unknown_relation": "a relation label the reader does not know",
    "unknown_datavalue_type": "a Wikidata datavalue type the reader does not know",
    "not_a_frame": "an XML file whose root is not a frame",
    "not_a_lexunit": "an XML file whose root is not a lexical unit",
    "frame_not_in_fn17": "a frame FrameNet 1.7 does not have",
    "frame_not_in_dictionary": "a frame in no Subframe tree of the grounding dictionary",
    "orphan_coref": "a coreference cluster names a mention that is not there",
    "relation_dropped": "a relation whose mention was dropped",
    "no_verb": "an event tuple without a verb",
    "no_events": "a document without a usable event",
    "no_target": "an annotation set without a target",
    "no_gf_layer": "an annotation set without a grammatical-function layer",
    "no_subject_or_object": "an event without a subject or an object",
    "mention_cap": "above the per-type mention cap",
    "too_few_mentions": "a type with too few mentions to keep",
    "mostly_title_mentions": "a type whose mentions are mostly its article's title",
    "context_too_short": "a context shorter than the minimum",
    "context_too_long": "a context longer than the maximum",
    "numeral_inconsistent": "a label holds a number its context lacks",
    "no_english_description": "no English article prose to describe the event",
    "no_english_label": "no English label",
    "no_english_article": "no English Wikipedia article",
    "single_language": "sitelinks in fewer than two build languages",
    "is_class": "a class (the P31 target of other candidates), not an event",
    "hierarchy_multi_parent": "a second parent in the part-of hierarchy (the first is kept)",
    "hierarchy_cycle": "an edge that closes a part-of cycle",
    "hierarchy_depth_cut": "deeper than the hierarchy's maximum height",
}
