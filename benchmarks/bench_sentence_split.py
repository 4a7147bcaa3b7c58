"""Benchmark: sentence splitters for the ``text`` reader - boundary precision / recall / F1 and sentences/s.

Candidates (each a maintained PyPI library; one absent is skipped with a line): syntok (``segmenter.analyze``:
sentences and tokens with offsets), pysbd (``Segmenter(char_span=True)``: sentences only, no tokens) and spaCy's
rule-based sentencizer on a blank English pipeline (``spacy.blank("en")`` + ``sentencizer``: tokens with offsets).

Gold: documents whose sentence boundaries are known, their sentences joined with single spaces.
- ``maven_raw``: real MAVEN documents (Wikipedia articles): the original sentence strings that OntoEvent-MAVEN
  (``ontoevent_maven/event_relation.json`` of the shared data) keeps with their document id and sentence index,
  in sentence order (only the sentences OntoEvent kept, so some neighbours are not adjacent in the article).
- ``maven_tokens``: the MAVEN subset (``maven/subset/maven_subset_a.json``) has tokens and no document grouping:
  each sentence is its tokens joined with spaces, and consecutive blocks of ``--block`` sentences form a document.
- ``written``: a few self-written news-like paragraphs (abbreviations, initials, quotes, numbers); the only set
  of a ``--smoke`` run, which reads no shared data.
A boundary is the character offset where a sentence after the first starts; a predicted one counts when it is
exactly a gold one. Precision, recall and F1 are micro-averaged over the set; sentences/s is gold sentences over
the median wall time of ``--repeats`` passes (one thread, each library warmed up first).

Recorded as a benchmark run (``eventatlas.store.benchmarking``): per set and alternative, F1 and sentences/s of
the chosen library (``CHOSEN``, what ``eventatlas.readers.text`` uses) against it, and (without ``--smoke``) what
importing each costs a fresh process: seconds, peak MB and whether torch came along.

Usage: python benchmarks/bench_sentence_split.py [--repeats 3] [--block 10] [--smoke] [--no-publish]
"""
from __future__ import annotations

import argparse
import collections
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from eventatlas.store import benchmarking  # noqa: E402

CHOSEN = "syntok"

WRITTEN = [
    ["The city council met on Tuesday evening.", "Mr. Alvarez, who chairs the budget committee, proposed a new tax on "
     "parking garages.", "It passed 7 to 2 after a debate of three hours.", "Residents said they were surprised."],
    ["Flooding closed the main road into St. Albans early on Friday.", "The river rose 2.5 metres in six hours, "
     "according to the U.K. Environment Agency.", "\"We have not seen water like this since 1998,\" said Dr. J. "
     "Okafor, a local hydrologist.", "Schools will stay shut until Monday."],
    ["Shares of Northwind Inc. fell 4% on Wednesday.", "The company had warned that sales in Europe would miss "
     "its forecast.", "Analysts at Brightline Capital cut their target price to $41.50.", "Is the slump over?",
     "Nobody at the firm would say."],
]


def written() -> list[list[str]]:
    return [list(d) for d in WRITTEN]


def maven_raw(shared: Path) -> list[list[str]] | None:
    p = shared / "ontoevent_maven" / "event_relation.json"
    if not p.exists():
        return None
    docs: dict[str, dict[int, str]] = collections.defaultdict(dict)
    for rel, pairs in json.loads(p.read_text(encoding="utf-8")).items():
        for pair in pairs:
            for m in pair if isinstance(pair, list) else ():
                if isinstance(m, dict) and m.get("event_mention"):
                    docs[m["doc_id"]][int(m["sent_id"])] = " ".join(m["event_mention"].split())
    return [[d[i] for i in sorted(d)] for _, d in sorted(docs.items())]


def maven_tokens(shared: Path, block: int) -> list[list[str]] | None:
    p = shared / "maven" / "subset" / "maven_subset_a.json"
    if not p.exists():
        return None
    sents = [" ".join(r["tokens"]) for r in json.loads(p.read_text(encoding="utf-8"))]
    return [sents[i:i + block] for i in range(0, len(sents), block)]


def splitters() -> dict[str, Callable[[str], list[int]]]:
    """name -> function(document) -> start offsets of its predicted sentences (the libraries installed)."""
    out: dict[str, Callable[[str], list[int]]] = {}
    try:
        from syntok import segmenter

        def syntok_starts(text: str) -> list[int]:
            return [sent[0].offset for para in segmenter.analyze(text) for sent in para if sent]
        out["syntok"] = syntok_starts
    except ImportError:
        print("syntok not installed: skipped")
    try:
        import pysbd

        seg = pysbd.Segmenter(language="en", clean=False, char_span=True)

        def pysbd_starts(text: str) -> list[int]:
            return [s.start + (len(s.sent) - len(s.sent.lstrip())) for s in seg.segment(text) if s.sent.strip()]
        out["pysbd"] = pysbd_starts
    except ImportError:
        print("pysbd not installed: skipped")
    try:
        import spacy

        nlp = spacy.blank("en")
        nlp.add_pipe("sentencizer")

        def spacy_starts(text: str) -> list[int]:
            return [next(t.idx for t in s if not t.is_space) for s in nlp(text).sents if s.text.strip()]
        out["spacy"] = spacy_starts
    except ImportError:
        print("spacy not installed: skipped (pip install spacy to compare it)")
    return out


IMPORTS = {"syntok": "from syntok import segmenter", "pysbd": "import pysbd",
           "spacy": "import spacy; spacy.blank('en').add_pipe('sentencizer')"}
# peak RSS from VmHWM: ru_maxrss would keep the forking parent's peak across exec
_PROBE = ("import json, re, sys, time; t = time.perf_counter(); exec(sys.argv[1]); s = time.perf_counter() - t; "
          "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()); "
          "print(json.dumps([s, int(hwm.group(1)) / 1024 if hwm else None, 'torch' in sys.modules]))")


def import_cost(lib: str) -> dict:
    """What loading the library costs an ingest: seconds, peak MB of a fresh process, whether torch came along."""
    out = subprocess.run([sys.executable, "-c", _PROBE, IMPORTS[lib]], capture_output=True, text=True, timeout=300)
    if out.returncode:
        return {"error": out.stderr[-300:]}
    seconds, mb, torch = json.loads(out.stdout)
    return {"import_s": seconds, "peak_mb": mb, "imports_torch": torch}


def score(docs: list[list[str]], starts: Callable[[str], list[int]]) -> dict[str, float]:
    tp = n_gold = n_pred = 0
    for sents in docs:
        text = " ".join(sents)
        gold, pos = set(), 0
        for i, s in enumerate(sents):
            if i:
                gold.add(pos)
            pos += len(s) + 1
        pred = {p for p in starts(text) if p > 0}
        tp += len(gold & pred)
        n_gold += len(gold)
        n_pred += len(pred)
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0, "boundaries": n_gold}


def speed(docs: list[list[str]], starts: Callable[[str], list[int]], repeats: int) -> tuple[float, list[float]]:
    texts = [" ".join(s) for s in docs]
    n = sum(len(s) for s in docs)
    starts(texts[0])  # warm-up: lazy imports, compiled patterns
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for t in texts:
            starts(t)
        rates.append(n / (time.perf_counter() - t0))
    return statistics.median(rates), rates


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--block", type=int, default=10, help="sentences per document built from the MAVEN subset")
    a = benchmarking.parse_args(ap, argv, smoke={"repeats": 1})
    from eventatlas import config

    bench = benchmarking.Benchmark("sentence_split", a, libraries=("syntok", "pysbd", "spacy"))
    sets = {"written": written()}
    if not a.smoke:  # a smoke run reads nothing outside its own text
        shared = config.shared_data()
        for name, docs in (("maven_raw", maven_raw(shared)), ("maven_tokens", maven_tokens(shared, a.block))):
            if docs is None:
                print(f"{name}: no shared data under {shared}: skipped")
            else:
                sets[name] = docs
    libs = splitters()
    if CHOSEN not in libs:
        raise SystemExit(f"{CHOSEN} (the text reader's splitter) is not installed: pip install -e .")
    result: dict = {"chosen": CHOSEN, "sets": {}}
    for set_name, docs in sets.items():
        result["sets"][set_name] = {"documents": len(docs), "sentences": sum(map(len, docs)), "libraries": {}}
        for lib, fn in libs.items():
            rate, rates = speed(docs, fn, a.repeats)
            row = {**score(docs, fn), "sentences_per_s": rate, "samples": rates}
            result["sets"][set_name]["libraries"][lib] = row
            print(f"{set_name:13s} {lib:7s} P {row['precision']:.3f} R {row['recall']:.3f} F1 {row['f1']:.3f} "
                  f"{rate:9.0f} sentences/s", flush=True)
    cases = []
    if not a.smoke:  # a fresh process per library: seconds each, spaCy's with torch
        result["imports"] = {lib: import_cost(lib) for lib in libs}
        for lib, c in result["imports"].items():
            print(f"import {lib:7s} {c.get('import_s', float('nan')):.2f} s, peak {c.get('peak_mb', float('nan')):.0f} MB, "
                  f"torch {'loaded' if c.get('imports_torch') else 'not loaded'}", flush=True)
        ours = result["imports"][CHOSEN]
        for lib, c in result["imports"].items():
            if lib != CHOSEN and "import_s" in c and "import_s" in ours:
                kw = {"setting": f"import vs {lib}", "ours_label": CHOSEN, "baseline_label": lib}
                cases.append(benchmarking.case("import s", ours["import_s"], c["import_s"], higher_is_better=False, **kw))
                cases.append(benchmarking.case("import peak MB", ours["peak_mb"], c["peak_mb"], higher_is_better=False, **kw))
    for set_name, s in result["sets"].items():
        ours = s["libraries"][CHOSEN]
        for lib, other in s["libraries"].items():
            if lib == CHOSEN:
                continue
            kw = {"setting": f"{set_name} vs {lib}", "ours_label": CHOSEN, "baseline_label": lib}
            cases.append(benchmarking.case("boundary F1", ours["f1"], other["f1"], higher_is_better=True, **kw))
            cases.append(benchmarking.case("sentences/s", ours["sentences_per_s"], other["sentences_per_s"],
                                           higher_is_better=True, ours_samples=ours["samples"],
                                           baseline_samples=other["samples"], **kw))
        if len(s["libraries"]) == 1:  # nothing to compare with: record the chosen library's own figures
            cases.append(benchmarking.case("boundary F1", ours["f1"], None, higher_is_better=True, setting=set_name,
                                           ours_label=CHOSEN))
    bench.finish(cases, result)
    return result


if __name__ == "__main__":
    main()
