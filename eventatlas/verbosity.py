"""Quiet by default, verbose on request (``eventatlas -v``).

Quiet: no Prefect console logging (run logs still go to the Prefect API, so a server's UI and
``--watch`` keep them; the CLI prints its own results and one-line errors), no Hugging Face
progress bars ("Loading weights", "Writing model shards") or info logs, and no scikit-learn
"equal similarities" warnings from affinity propagation on tiny samples. eventatlas's own
progress bars (ingest, embedding, training) stay. Verbose: library defaults.

Environment variables are set before the libraries are imported (they read them at import);
libraries already imported in this process are adjusted in place. A variable the user set
explicitly is left alone.
"""
from __future__ import annotations

import logging
import os
import sys
import warnings

QUIET_ENV = {
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "CRITICAL",
}
# warnings that say nothing actionable about a result (sklearn AffinityPropagation on tiny inputs)
QUIET_WARNINGS = (r".*mutually equal similarities.*", r".*Affinity propagation did not converge.*")
_set_by_us: set[str] = set()


def set_verbosity(verbose: bool) -> None:
    """Configure this process's output; ``EVENTATLAS_VERBOSE`` records the choice ("0" / "1")."""
    os.environ["EVENTATLAS_VERBOSE"] = "1" if verbose else "0"
    for k, v in QUIET_ENV.items():
        if verbose:
            if k in _set_by_us:
                os.environ.pop(k, None)
                _set_by_us.discard(k)
        elif not os.environ.get(k):  # unset or empty
            os.environ[k] = v
            _set_by_us.add(k)
    for pattern in QUIET_WARNINGS:
        if verbose:
            warnings.filters[:] = [f for f in warnings.filters if not (f[0] == "ignore" and f[1] is not None
                                                                      and f[1].pattern == pattern)]
        else:
            warnings.filterwarnings("ignore", message=pattern)
    if "transformers" in sys.modules:
        from transformers.utils import logging as tlog

        if verbose:
            tlog.enable_progress_bar()
            tlog.set_verbosity_warning()
        else:
            tlog.disable_progress_bar()
            tlog.set_verbosity_error()
    if "prefect" in sys.modules:  # its console handler sits on the root logger
        for h in logging.getLogger().handlers:
            if type(h).__name__ == "PrefectConsoleHandler":
                h.setLevel(logging.NOTSET if verbose else logging.CRITICAL)
