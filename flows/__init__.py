"""Prefect flows composing the tasks in ``tasks/``. Flow names: ingest, embed, cluster, evaluate, train-all, publish, build-wikievents."""
