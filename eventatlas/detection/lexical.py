"""The lexical baseline: every word n-gram whose lower-cased text was a trigger in training, with that
trigger's majority type (ties: the alphabetically first type, so it is deterministic). Matching is greedy,
left to right, longest n-gram first, over the same words the detector sees, so both are scored on the same
spans. It needs no model: the floor a trained detector has to clear."""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Iterable, Sequence

from .words import Sentence


class LexicalDetector:
    def __init__(self, sentences: Iterable[Sentence]):
        counts: dict[str, Counter] = defaultdict(Counter)
        for s in sentences:
            for a, b, t in s.gold:
                counts[s.text[a:b].lower()][t] += 1
        self.lexicon = {w: min(c, key=lambda t: (-c[t], t)) for w, c in counts.items()}
        self.max_words = max((len(w.split()) for w in self.lexicon), default=1) + 2  # "no.2" is 3 BERT words

    def predict(self, text: str, word_spans: Sequence[tuple[int, int]]) -> list[tuple[int, int, str]]:
        out, k, n = [], 0, len(word_spans)
        while k < n:
            for j in range(min(n, k + self.max_words), k, -1):
                a, b = word_spans[k][0], word_spans[j - 1][1]
                t = self.lexicon.get(text[a:b].lower())
                if t is not None:
                    out.append((a, b, t))
                    k = j
                    break
            else:
                k += 1
        return out
