"""Internals of the ``batch_attention`` method (Edwards & Ji, EACL 2023): semi-supervised new event
type induction with contrastive-loss-enforced batch attention.

model (shared MentionEncoder + Q/K clusterer + naming head), losses (masked semi-supervised contrastive
loss), augment (back-translation / offline fallbacks), training (the method's TrainTask for the shared
training core and its unsupervised epoch selection callback), stopping (silhouette window rules),
evaluate (clustering inputs x algorithms, ensembles, naming and linking of a trained run), mappings
(type -> FrameNet frame tables in datasets/mappings). The method entry point is
``eventatlas.methods.batch_attention``. No Prefect import here (core package rule).
"""
