"""Semi-supervised new event type induction with contrastive-loss-enforced batch attention
(Edwards & Ji, EACL 2023), type naming and FrameNet linking.

model (encoder + Q/K clusterer + naming head), loss (masked semi-supervised contrastive loss),
augment (back-translation / offline fallbacks), train (Trainer), stopping (unsupervised early
stopping), evaluate (clustering inputs x algorithms, ensembles), naming (naming + linking ranks),
data (dataset -> MentionSet), method (``batch_attention`` for train-all), posthoc (background
train / evaluate / publish), mappings (type -> FrameNet frame tables in datasets/mappings).
No Prefect import here (core package rule).
"""
