"""Wikinews evaluation set: publication dates from date categories, link harvesting with {{w|...}}."""
from __future__ import annotations

import re
from datetime import date

from .backend import Page
from .links import harvest, paragraphs

MONTHS = {
    "en": ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"],
    "de": ["januar", "februar", "märz", "april", "mai", "juni", "juli", "august", "september", "oktober", "november", "dezember"],
    "fr": ["janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre", "novembre", "décembre"],
    "es": ["enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto", "septiembre", "octubre", "noviembre", "diciembre"],
}
_EN = re.compile(r"^([A-Za-z]+) (\d{1,2}), (\d{4})$")  # "March 4, 2011"
_DMY = re.compile(r"^(\d{1,2})\.? (?:de )?([^\W\d_]+)(?: de)? (\d{4})$", re.U)  # "4. März 2011", "4 mars 2011", "4 de marzo de 2011"
_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")


def parse_date_category(cat: str) -> date | None:
    c = cat.replace("_", " ").strip()
    try:
        if m := _ISO.match(c):
            return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        if m := _EN.match(c):
            mon = m.group(1).lower()
            if mon in MONTHS["en"]:
                return date(int(m.group(3)), MONTHS["en"].index(mon) + 1, int(m.group(2)))
        if m := _DMY.match(c):
            mon = m.group(2).lower()
            for names in MONTHS.values():
                if mon in names:
                    return date(int(m.group(3)), names.index(mon) + 1, int(m.group(1)))
    except ValueError:
        return None
    return None


def publication_date(page: Page) -> str | None:
    """Earliest date category of the page (ISO), the way Wikinews files articles by day."""
    ds = sorted(d for d in (parse_date_category(c) for c in page.categories) if d)
    return ds[0].isoformat() if ds else None


def news_links(page: Page, targets: set[str]):
    return harvest(page.wikitext, targets, wikinews=True)


def document_text(page: Page) -> str:
    return "\n\n".join(paragraphs(page.wikitext, wikinews=True))
