"""Event descriptions: title + first prose paragraph of each language article, markup stripped."""
from __future__ import annotations

from dataclasses import dataclass

from .backend import Page
from .links import paragraphs


@dataclass(frozen=True)
class Description:
    qid: str
    lang: str
    title: str
    text: str  # first paragraph, plain text
    page_id: int

    @property
    def full(self) -> str:
        return f"{self.title}. {self.text}" if self.text else self.title


def first_paragraph(wikitext: str) -> str:
    paras = paragraphs(wikitext)
    return paras[0] if paras else ""


def describe(qid: str, page: Page) -> Description:
    return Description(qid, page.lang, page.title, first_paragraph(page.wikitext), page.page_id)
