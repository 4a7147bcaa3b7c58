"""Run layer, free of orchestration: :mod:`.runner` runs one method on one dataset into a run directory
(what the Prefect tasks and the CLI's one-shot path call); :mod:`.scaleout` plans processes per device."""
