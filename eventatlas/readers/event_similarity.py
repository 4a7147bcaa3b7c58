"""Event-similarity benchmarks over (subject, verb, object) events -> ``event_pairs``.

* hard similarity (Weber et al. 2018), two layouts, detected per line:
  - numbered: ``1 s v o s v o LABEL`` (whitespace-separated, one word per slot; LABEL 2 = the
    similar pair of its block, 1 = the dissimilar one); consecutive lines form a block of two;
  - quadruples (also the extended Ding et al. 2019 set): 12 fields joined by `` | ``: the similar
    pair (e1, e2) then the dissimilar pair (e3, e4); one block per line.
  ``score`` is 1.0 for the similar pair and 0.0 for the dissimilar one in both layouts (raw label in
  ``extra``); a block must hold exactly one of each, otherwise it is rejected (``incomplete_block``).
* transitive sentence similarity (Kartsaklis & Sadrzadeh 2014): ``s | v | o | s | v | o | score``.
* MCNC (Weber's chained narrative cloze): blocks of ``subj|pred|obj`` context lines, ``HOLDOUT_SEP``,
  the held-out (true) next event, ``NEG_SEP``, negative candidates, ``DOC_SEP`` between blocks.
  One row per candidate: ``event_a`` = last context event, ``event_b`` = candidate, ``score`` 1.0 for
  the held-out event and 0.0 for negatives, ``extra`` = {context: [...], candidate: index}.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from ..errors import InputError
from ..io import Rejects
from ._common import bump, dumps, iter_lines

_NUM_LINE = re.compile(r"^\d+\s")


def _svo(s: str, v: str, o: str) -> dict:
    return {"subj": s.strip(), "verb": v.strip(), "obj": o.strip()}


def _files(path: Path, pattern: str = "*.txt") -> list[Path]:
    if path.is_dir():
        fs = sorted(path.glob(pattern))
        if not fs:
            raise InputError(path, "-", f"no {pattern} files in directory")
        return fs
    return [path]


def _pair(dataset, task, item_id, block, a, b, score, extra):
    return {"dataset": dataset, "item_id": item_id, "task": task, "block_id": block, "event_a": a, "event_b": b,
            "score": score, "extra": dumps(extra)}


def read_hard(path, *, dataset: str = "hard_similarity", rejects: Rejects, stats: dict | None = None, **opts) -> Iterator[tuple[str, dict]]:
    path = Path(path)
    files = [p for p in _files(path) if "hard" in p.name] if path.is_dir() else [path]
    for f in files:
        pending: list[tuple[int, dict, dict, int]] = []  # numbered layout: (line, a, b, label) awaiting its block partner

        def flush_numbered():
            labels = sorted(p[3] for p in pending)
            block = f"{f.stem}:{pending[0][0]}"
            if labels != [1, 2]:
                rejects.add(f, f"line {pending[0][0]}", "incomplete_block", f"block labels {labels}, expected one 1 and one 2",
                            [p[3] for p in pending])
            else:
                for n, a, b, lab in pending:
                    yield _pair(dataset, "hard_similarity", f"{f.stem}:{n}", block, a, b, 1.0 if lab == 2 else 0.0, {"label": lab, "layout": "numbered"})
            pending.clear()

        for n, line in iter_lines(f):
            if not line.strip():
                continue
            if "|" in line:
                fields = [x.strip() for x in line.split("|")]
                if len(fields) != 12 or not all(fields):
                    rejects.add(f, f"line {n}", "bad_record", f"expected 12 non-empty ' | ' fields, got {len(fields)}", line)
                    continue
                e = [_svo(*fields[i : i + 3]) for i in range(0, 12, 3)]
                block = f"{f.stem}:{n}"
                yield "event_pairs", _pair(dataset, "hard_similarity", f"{block}:sim", block, e[0], e[1], 1.0, {"label": "similar", "layout": "quadruple"})
                yield "event_pairs", _pair(dataset, "hard_similarity", f"{block}:dis", block, e[2], e[3], 0.0, {"label": "dissimilar", "layout": "quadruple"})
                bump(stats, "blocks")
                continue
            parts = line.split()
            if not _NUM_LINE.match(line) or len(parts) != 8 or parts[7] not in ("1", "2"):
                rejects.add(f, f"line {n}", "bad_record", "expected '<n> s v o s v o LABEL' with LABEL 1 or 2", line)
                continue
            pending.append((n, _svo(*parts[1:4]), _svo(*parts[4:7]), int(parts[7])))
            if len(pending) == 2:
                for row in flush_numbered():
                    yield "event_pairs", row
                bump(stats, "blocks")
        if pending:
            for row in flush_numbered():
                yield "event_pairs", row


def read_transitive(path, *, dataset: str = "transitive_similarity", rejects: Rejects, stats: dict | None = None, **opts) -> Iterator[tuple[str, dict]]:
    for f in _files(Path(path)):
        for n, line in iter_lines(f):
            if not line.strip():
                continue
            fields = [x.strip() for x in line.split("|")]
            if len(fields) != 7 or not all(fields[:6]):
                rejects.add(f, f"line {n}", "bad_record", f"expected 7 ' | ' fields, got {len(fields)}", line)
                continue
            try:
                score = float(fields[6])
            except ValueError:
                rejects.add(f, f"line {n}", "bad_score", f"score {fields[6]!r} is not a number", line)
                continue
            yield "event_pairs", _pair(dataset, "transitive_similarity", f"{f.stem}:{n}", None, _svo(*fields[0:3]), _svo(*fields[3:6]), score, None)


def read_mcnc(path, *, dataset: str = "mcnc", rejects: Rejects, stats: dict | None = None, **opts) -> Iterator[tuple[str, dict]]:
    path = Path(path)
    files = [p for p in _files(path) if "mcnc" in p.name] if path.is_dir() else [path]
    for f in files:
        ctx: list[dict] = []
        hold: list[dict] = []
        negs: list[dict] = []
        state, start = "context", 1

        def emit(end_line):
            block = f"{f.stem}:{start}"
            if not ctx or len(hold) != 1 or not negs:
                rejects.add(f, f"lines {start}-{end_line}", "incomplete_block",
                            f"block needs context, one held-out event and negatives (got {len(ctx)}, {len(hold)}, {len(negs)})", None)
                return
            for i, cand in enumerate(hold + negs):
                yield _pair(dataset, "mcnc", f"{block}:{i}", block, ctx[-1], cand, 1.0 if i == 0 else 0.0,
                            {"context": ctx, "candidate": i, "n_candidates": 1 + len(negs)})
            bump(stats, "blocks")

        n = 0
        for n, line in iter_lines(f):
            tok = line.strip()
            if not tok:
                continue
            if tok == "HOLDOUT_SEP":
                state = "holdout"
            elif tok == "NEG_SEP":
                state = "neg"
            elif tok == "DOC_SEP":
                yield from (("event_pairs", r) for r in emit(n))
                ctx, hold, negs, state, start = [], [], [], "context", n + 1
            else:
                fields = tok.split("|")
                if len(fields) != 3:
                    rejects.add(f, f"line {n}", "bad_record", f"expected subj|pred|obj, got {len(fields)} fields", line)
                    continue
                {"context": ctx, "holdout": hold, "neg": negs}[state].append(_svo(*fields))
        if ctx or hold or negs:
            yield from (("event_pairs", r) for r in emit(n))
