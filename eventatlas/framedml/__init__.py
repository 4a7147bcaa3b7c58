"""Supervised semantic frame induction with deep metric learning (Yamada et al. 2023): method
internals of :mod:`eventatlas.methods.frame_dml`.

One loss per module under :mod:`.losses` (:mod:`.losses.contrastive`, :mod:`.losses.triplet`, :mod:`.losses.arcface` through
pytorch-metric-learning; :mod:`.losses.softmax`, :mod:`.losses.adacos` by hand), the per-anchor partner sampler
(:mod:`.sampling`), the model and training task on the shared training core (:mod:`.training`) and
the representations v_word / v_mask / v_w+m (:mod:`.represent`). The verb split lives in the data
layer (:mod:`eventatlas.data.verbsplit`), the transferred-cut clusterings in the clustering layer
(:mod:`eventatlas.cluster.frames`), the scores in the evaluation layer (:mod:`eventatlas.evaluation.frames`).
"""
LOSSES = ("contrastive", "triplet", "softmax", "arcface", "adacos")
PAIR_LOSSES = ("contrastive", "triplet")
