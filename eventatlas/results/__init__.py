"""Presentation: leaderboards (:mod:`.leaderboard`), the report and its pages (:mod:`.report`,
:mod:`.experiments`, :mod:`.templating`) and the atlas's queries (:mod:`.atlas_query`), all read from the
warehouse (:mod:`eventatlas.store`). Near the top: only the pipelines and the CLI build on it."""
