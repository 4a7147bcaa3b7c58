"""Event detection: find event triggers in raw sentences (type-agnostic spans, multi-token triggers) and type
them over a training inventory. :mod:`.words` aligns sentences to the encoder's words, :mod:`.model` is the
token-level model and its training task, :mod:`.loss` its loss, :mod:`.decode` turns word scores into spans,
:mod:`.lexical` is the baseline that needs no model, :mod:`.protocol` trains, selects and scores it."""
