"""Data layer: typed manifests, per-dataset protocol settings, labelled-mention selection."""
from .manifest import KINDS, Manifest, ingested, read_table, table_path, table_rows
from .protocol import protocol_for, registry_entry
from .selection import (LabelledMentions, NotApplicable, SelectionConfig, choose_unseen_types, lu_pos_of, rank_types,
                        select_labelled)
from .verbsplit import FrameMentions, fold_roles, frame_mentions, split_verbs

__all__ = ["KINDS", "LabelledMentions", "Manifest", "NotApplicable", "ingested", "lu_pos_of", "protocol_for",
           "rank_types", "registry_entry", "select_labelled", "SelectionConfig", "choose_unseen_types", "FrameMentions",
           "fold_roles", "frame_mentions", "split_verbs", "read_table", "table_path", "table_rows"]
