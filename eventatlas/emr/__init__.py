"""Few-shot event mention retrieval (EMR): query by example over any ingested corpus.

* :mod:`.episodes` — the k-shot m-way evaluation framework: a seeded, recorded sampler over any
  labelled dataset (m types, per-type test corpus / query / dev pools, n0 "None" mentions from
  other types and from sentences without events with a recorded content-word candidate trigger).
* :mod:`.losses.siamese` — the Siamese loss ``y·max(1−S, 0)² + (1−y)·S²``.
* :mod:`.models` — the ad-hoc ranker (mean cosine over the k shots) and the per-query Siamese
  network (3 dense layers on the frozen representation), trained for many queries at once.
* :mod:`.meta` — the same network meta-trained once on other types; :mod:`.finetune` /
  :mod:`.tuned_encoder` — the encoder itself fine-tuned for retrieval (:mod:`.losses.supcon`).
* :mod:`.rankers` — the pool embedded once and the run's list of rankers; :mod:`.dev` — the
  development episode and the dev rule (MAP and novel-trigger recall) that chooses epochs and the default.
* :mod:`.search` — what ``eventatlas search`` runs: examples -> ranked corpus mentions (faiss).

The method that evaluates them is :mod:`eventatlas.methods.emr` (``train-all --methods emr``).
"""
