"""The induction methods' mention selection is declared once (``eventatlas.data.SelectionConfig``)."""
from __future__ import annotations

import pytest

from eventatlas.data.selection import SelectionConfig, select_labelled
from eventatlas.induction.protocol import select_mentions
from eventatlas.methods.batch_attention import BatchAttentionConfig
from eventatlas.methods.untuned import UntunedConfig
from test_batch_attention_options import COUNTS, _sentences_table


def test_both_induction_methods_declare_the_one_selection():
    for cls in (UntunedConfig, BatchAttentionConfig):
        assert issubclass(cls, SelectionConfig)
        for name, field in SelectionConfig.model_fields.items():
            own = cls.model_fields[name]
            # one meaning: the same default everywhere; only a method's tighter bound may differ
            assert own.default == field.default, (cls.__name__, name)
    # batch_attention's own bounds: training needs a seen type, scoring a batch of ten
    with pytest.raises(ValueError):
        BatchAttentionConfig(k_seen=0)
    with pytest.raises(ValueError):
        BatchAttentionConfig(max_mentions=9)
    assert UntunedConfig(k_seen=0).k_seen == 0  # untuned: no seen type = every type clustered


def test_the_same_fields_select_the_same_mentions_in_both_methods():
    table = _sentences_table(COUNTS)
    opts = {"n_unseen": 3, "unseen_min_mentions": 10, "heldout_sentences": 0.3, "part": "heldout", "k_seen": 4}
    via_untuned = UntunedConfig(**opts).select(table, seed=1, k_seen_default=10)
    via_batch = select_mentions(table, BatchAttentionConfig(**opts), 1)
    direct = select_labelled(table, k_seen=4, n_unseen=3, unseen_min_mentions=10, heldout_sentences=0.3,
                             part="heldout", max_eval=20_000, seed=1)
    for sel in (via_untuned, via_batch):
        assert sel.mention_ids == direct.mention_ids and sel.eval_labels.tolist() == direct.eval_labels.tolist()
        assert sel.record == direct.record


def test_an_unset_k_seen_takes_each_methods_default():
    table = _sentences_table(COUNTS)
    # untuned holds out its default 10; batch_attention with n_unseen sees every type that is not unseen
    untuned = UntunedConfig(n_unseen=3, unseen_min_mentions=10).select(table, seed=0, k_seen_default=10)
    batch = select_mentions(table, BatchAttentionConfig(n_unseen=3, unseen_min_mentions=10), 0)
    assert untuned.record["k_seen_requested"] == 10 and batch.record["k_seen_requested"] == len(COUNTS) - 3
    # the unseen choice, and so the mentions clustered, do not depend on it
    assert untuned.record["unseen_choice"] == batch.record["unseen_choice"]
    assert untuned.mention_ids == batch.mention_ids
