"""The fixture world of the wiki event-grounding build, shared by both backends.

``build_world()`` returns a :class:`World`: Wikidata entities (events, non-events,
classes, items failing each pruning rule; some in the old dump form), Wikipedia
pages in en/de/fr/es (event articles, host articles linking to events with
anchors, redirects, non-article namespaces) and Wikinews pages with ``{{w|...}}``
links and date categories. Everything is generated deterministically from a seed,
so part B's HTTP server and ``write_dumps`` serve the very same world.

``write_dumps(world, out_dir)`` writes it as real dump files: a Wikidata JSON dump
(``.json.gz`` or ``.json.bz2``, one entity per line inside ``[ ... ]``), per language
``pages-articles-multistream.xml.bz2`` + its index, and Wikinews
``pages-meta-current.xml.bz2`` + ``categorylinks.sql.gz``.

``WORLD_PARAMS`` are the small build thresholds this world is designed for and
``EXPECTED`` what a correct build must conclude (tests assert it).
"""
from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from eventatlas.wiki.backend import MemoryBackend, Page, normalize_title

LANGS = ("en", "de", "fr", "es")
DUMP_DATE = "20261101"

# Build thresholds for this world (real builds use 100/2000/20/30/0.5).
WORLD_PARAMS = {
    "min_context_chars": 100,
    "max_context_chars": 2000,
    "max_contexts_per_mention": 3,
    "min_mentions": 4,
    "max_title_share": 0.5,
    "max_height": 3,
    "seed": 13,
}


@dataclass
class Ev:
    """One item of the world: an event (or a candidate failing some rule)."""

    qid: str
    labels: dict[str, str]
    desc: dict[str, str]
    when: tuple  # ("point", (y, m, d)) | ("span", (y,m,d), (y,m,d)) | ("duration", days) | ()
    where: tuple  # ("loc", qid) | ("coord", lat, lon) | ()
    part_of: tuple[str, ...] = ()
    has_part: tuple[str, ...] = ()
    follows: tuple[str, ...] = ()
    followed_by: tuple[str, ...] = ()
    p31: tuple[str, ...] = ("Q1190554",)  # occurrence
    sitelinks: dict[str, str] | None = None  # lang -> title; default: labels of LANGS
    old_format: bool = False
    anchors: dict[str, list[str]] = field(default_factory=dict)  # extra anchor texts per language
    mentions: dict[str, int] = field(default_factory=dict)  # lang -> number of linking paragraphs
    lead: str | None = None  # English first paragraph override ("" = none)

    def year(self) -> int | None:
        if self.when and self.when[0] in ("point", "span"):
            return self.when[1][0]
        return None


def _l(en, de=None, fr=None, es=None):
    return {k: v for k, v in {"en": en, "de": de, "fr": fr, "es": es}.items() if v}


# --- the events -------------------------------------------------------------------------------
EVENTS: list[Ev] = [
    # Tree A (height 3): Aurelian War > campaigns > battles; one P527-only edge, a P155/P156 pair.
    Ev("Q900100", _l("Aurelian War", "Aurelischer Krieg", "Guerre aurélienne", "Guerra aureliana"),
       _l("war in Valdoria from 1931 to 1935", "Krieg in Valdoria von 1931 bis 1935", "guerre en Valdorie de 1931 à 1935", "guerra en Valdoria de 1931 a 1935"),
       ("span", (1931, 6, 1), (1935, 2, 1)), ("loc", "Q900900"), has_part=("Q900101", "Q900102"), p31=("Q198",),
       anchors={"en": ["the war", "Aurelian conflict"], "de": ["Aurelischen Krieg"], "fr": ["la guerre"], "es": ["la guerra"]},
       mentions={"en": 6, "de": 3, "fr": 2, "es": 2}),
    Ev("Q900101", _l("Northern Campaign (Aurelian War)", "Nordfeldzug (Aurelischer Krieg)", "Campagne du Nord (guerre aurélienne)", "Campaña del Norte (guerra aureliana)"),
       _l("first campaign of the Aurelian War", "erster Feldzug des Aurelischen Krieges", "première campagne de la guerre aurélienne", "primera campaña de la guerra aureliana"),
       ("span", (1931, 6, 1), (1932, 11, 30)), ("loc", "Q900901"), part_of=("Q900100",), has_part=("Q900103", "Q900104"),
       anchors={"en": ["northern campaign", "campaign in the north"], "de": ["Nordfeldzug"], "fr": ["campagne du Nord"], "es": ["campaña del Norte"]},
       mentions={"en": 4, "de": 2, "fr": 1, "es": 1}),
    Ev("Q900102", _l("Southern Campaign (Aurelian War)", "Südfeldzug (Aurelischer Krieg)", "Campagne du Sud (guerre aurélienne)", "Campaña del Sur (guerra aureliana)"),
       _l("second campaign of the Aurelian War", "zweiter Feldzug des Aurelischen Krieges", "seconde campagne de la guerre aurélienne", "segunda campaña de la guerra aureliana"),
       ("span", (1933, 3, 1), (1935, 2, 1)), ("coord", 44.1, 12.3),  # parent edge only via the war's P527
       anchors={"en": ["southern campaign", "campaign in the south"], "de": ["Südfeldzug"]},
       mentions={"en": 4, "de": 2, "fr": 1}),
    Ev("Q900103", _l("Battle of Kessel Ford", "Schlacht an der Kesselfurt", "Bataille du gué de Kessel", "Batalla del vado de Kessel"),
       _l("battle of the Aurelian War in 1931", "Schlacht des Aurelischen Krieges 1931", "bataille de la guerre aurélienne en 1931", "batalla de la guerra aureliana en 1931"),
       ("point", (1931, 9, 14)), ("coord", 45.52, 11.08), part_of=("Q900101",), followed_by=("Q900104",), p31=("Q178561",),
       old_format=True,
       anchors={"en": ["the battle at Kessel Ford", "Kessel Ford"], "de": ["Kesselfurt"], "fr": ["gué de Kessel"], "es": ["vado de Kessel"]},
       mentions={"en": 5, "de": 2, "fr": 2, "es": 1}),
    Ev("Q900104", _l("Siege of Marrow", "Belagerung von Marrow", "Siège de Marrow", "Sitio de Marrow"),
       _l("siege during the Aurelian War", "Belagerung im Aurelischen Krieg", "siège pendant la guerre aurélienne", "asedio durante la guerra aureliana"),
       ("span", (1932, 1, 5), (1932, 4, 2)), ("loc", "Q900905"), part_of=("Q900101",), follows=("Q900103",), p31=("Q188055",),
       anchors={"en": ["siege of the town", "Marrow siege"], "de": ["Belagerung"], "fr": ["siège"]},
       mentions={"en": 4, "de": 2, "fr": 1}),
    Ev("Q900105", _l("Battle of Tessaly Pass", "Schlacht am Tessalypass", "Bataille du col de Tessaly", "Batalla del paso de Tessaly"),
       _l("battle in the southern mountains", "Schlacht in den südlichen Bergen", "bataille dans les montagnes du sud", "batalla en las montañas del sur"),
       ("point", (1934, 5, 2)), ("coord", 43.9, 12.0), part_of=("Q900102",), p31=("Q178561", "Q900500"),
       anchors={"en": ["fighting at Tessaly Pass", "Tessaly"], "de": ["Tessalypass"], "es": ["paso de Tessaly"]},
       mentions={"en": 4, "de": 1, "es": 2}),
    # Deep tree (5 levels): the edge below height 3 is cut.
    Ev("Q900200", _l("Crimson Expedition", "Karminexpedition", "Expédition cramoisie", "Expedición carmesí"),
       _l("military expedition to the Esk coast", "Militärexpedition an die Esk-Küste", "expédition militaire sur la côte d'Esk", "expedición militar a la costa de Esk"),
       ("span", (1950, 4, 1), (1953, 8, 1)), ("loc", "Q900906"), has_part=("Q900201",),
       anchors={"en": ["the expedition", "Crimson campaign"], "de": ["Expedition"]}, mentions={"en": 4, "de": 2}),
    Ev("Q900201", _l("First Crimson Landing", "Erste Karminlandung", "Premier débarquement cramoisi"),
       _l("landing that opened the Crimson Expedition", "Landung zu Beginn der Karminexpedition", "débarquement qui ouvrit l'expédition"),
       ("point", (1950, 4, 3)), ("coord", 51.2, -3.1), part_of=("Q900200",),
       anchors={"en": ["landing", "first landing"], "de": ["Landung"]}, mentions={"en": 3, "de": 2}),
    Ev("Q900202", _l("Siege of Harrowgate", "Belagerung von Harrowgate", "Siège de Harrowgate"),
       _l("siege on the Esk coast", "Belagerung an der Esk-Küste", "siège sur la côte d'Esk"),
       ("span", (1951, 1, 1), (1951, 9, 1)), ("loc", "Q900906"), part_of=("Q900201",),
       anchors={"en": ["Harrowgate siege", "siege"], "fr": ["siège de la ville"]}, mentions={"en": 3, "fr": 2}),
    Ev("Q900203", _l("Harrowgate Breakout", "Ausbruch von Harrowgate", "Percée de Harrowgate"),
       _l("breakout ending the siege of Harrowgate", "Ausbruch am Ende der Belagerung", "percée mettant fin au siège"),
       ("point", (1951, 9, 1)), ("coord", 51.3, -3.0), part_of=("Q900202",), has_part=("Q900204",),
       anchors={"en": ["breakout", "the breakout"], "de": ["Ausbruch"]}, mentions={"en": 3, "de": 2}),
    Ev("Q900204", _l("Night Raid on Esk", "Nachtangriff auf Esk", "Raid nocturne sur Esk"),
       _l("raid during the Harrowgate breakout", "Angriff während des Ausbruchs", "raid pendant la percée"),
       ("point", (1951, 8, 30)), ("coord", 51.31, -3.02), part_of=("Q900203",), old_format=True,
       anchors={"en": ["night raid", "raid on Esk"], "fr": ["raid"]}, mentions={"en": 3, "fr": 2}),
    # A sequence (P155/P156 chain) with numbers in the labels (numeral consistency).
    Ev("Q900300", _l("1998 Harlow Marathon", "Harlow-Marathon 1998", "Marathon de Harlow 1998", "Maratón de Harlow 1998"),
       _l("1998 edition of the Harlow Marathon", "Ausgabe 1998 des Harlow-Marathons", "édition 1998 du marathon de Harlow", "edición 1998 del maratón de Harlow"),
       ("point", (1998, 4, 19)), ("loc", "Q900904"), followed_by=("Q900301",), p31=("Q40244",),
       anchors={"en": ["1998 race", "Harlow Marathon"], "de": ["Marathon 1998"]}, mentions={"en": 4, "de": 2}),
    Ev("Q900301", _l("1999 Harlow Marathon", "Harlow-Marathon 1999", "Marathon de Harlow 1999", "Maratón de Harlow 1999"),
       _l("1999 edition of the Harlow Marathon", "Ausgabe 1999 des Harlow-Marathons", "édition 1999 du marathon de Harlow", "edición 1999 del maratón de Harlow"),
       ("point", (1999, 4, 18)), ("loc", "Q900904"), follows=("Q900300",), followed_by=("Q900302",), p31=("Q40244",),
       old_format=True, anchors={"en": ["1999 race", "that year's marathon"], "es": ["maratón"]}, mentions={"en": 5, "es": 2}),
    Ev("Q900302", _l("2000 Harlow Marathon", "Harlow-Marathon 2000", "Marathon de Harlow 2000", "Maratón de Harlow 2000"),
       _l("2000 edition of the Harlow Marathon", "Ausgabe 2000 des Harlow-Marathons", "édition 2000 du marathon de Harlow", "edición 2000 del maratón de Harlow"),
       ("point", (2000, 4, 16)), ("loc", "Q900904"), follows=("Q900301",), p31=("Q40244",),
       anchors={"en": ["2000 race", "millennium marathon"], "fr": ["marathon"]}, mentions={"en": 4, "fr": 2}),
    # Singletons and a P155 link joining the treaty to tree A's component.
    Ev("Q900400", _l("2011 Ostrava Vale earthquake", "Erdbeben im Ostrava-Tal 2011", "Séisme de la vallée d'Ostrava de 2011", "Terremoto del valle de Ostrava de 2011"),
       _l("earthquake of magnitude 6.1 in 2011", "Erdbeben der Stärke 6,1 im Jahr 2011", "séisme de magnitude 6,1 en 2011", "terremoto de magnitud 6,1 en 2011"),
       ("point", (2011, 3, 3)), ("coord", 49.8, 18.2), p31=("Q7944",),
       anchors={"en": ["earthquake", "the 2011 quake"], "de": ["Erdbeben"], "fr": ["séisme"], "es": ["terremoto"]},
       mentions={"en": 4, "de": 2, "fr": 2, "es": 2}),
    Ev("Q900401", _l("Lantern Festival riot", "Laternenfest-Unruhen", "Émeute de la fête des lanternes", "Motín del festival de las linternas"),
       _l("riot in Kessel during the lantern festival", "Unruhen in Kessel während des Laternenfests", "émeute à Kessel pendant la fête", "motín en Kessel durante el festival"),
       ("span", (1968, 10, 2), (1968, 10, 4)), ("loc", "Q900901"),
       anchors={"en": ["riot", "festival riot"], "de": ["Unruhen"], "fr": ["émeute"], "es": ["motín"]},
       mentions={"en": 3, "de": 2, "fr": 2, "es": 1}),
    Ev("Q900402", _l("Great Flood of Lindmoor", "Große Flut von Lindmoor", "Grande inondation de Lindmoor", "Gran inundación de Lindmoor"),
       _l("flood of the Lind river", "Hochwasser der Lind", "crue de la Lind", "crecida del río Lind"),
       ("duration", 12), ("loc", "Q900907"), p31=("Q8068",),  # temporal only through P2047 duration
       anchors={"en": ["flood", "Lindmoor flood"], "de": ["Flut"], "fr": ["inondation"]}, mentions={"en": 4, "de": 2, "fr": 1}),
    Ev("Q900403", _l("Treaty of Calder", "Vertrag von Calder", "Traité de Calder", "Tratado de Calder"),
       _l("peace treaty that ended the Aurelian War", "Friedensvertrag zum Ende des Aurelischen Krieges", "traité de paix mettant fin à la guerre", "tratado de paz que puso fin a la guerra"),
       ("point", (1935, 2, 1)), ("loc", "Q900905"), follows=("Q900100",), p31=("Q131569",),
       anchors={"en": ["peace treaty", "the treaty"], "de": ["Vertrag"], "es": ["tratado"]}, mentions={"en": 4, "de": 2, "es": 1}),
    # Pruning failures.
    Ev("Q900500", _l("Mountain battle", "Gebirgsschlacht", "Bataille de montagne", "Batalla de montaña"),
       _l("battle fought in mountains", "Schlacht im Gebirge", "bataille en montagne", "batalla en montaña"),
       ("point", (1900, 1, 1)), ("loc", "Q900900"), p31=("Q178561",),  # a class: Q900105 is an instance of it
       mentions={"en": 4, "de": 2}),
    Ev("Q900501", _l(None, "Kesselbrand", "Incendie de Kessel"), _l(None, "Brand in Kessel", "incendie à Kessel"),
       ("point", (1970, 5, 5)), ("loc", "Q900901"), mentions={"de": 3, "fr": 2}),
    Ev("Q900502", _l("Vessen Bridge collapse"), _l("collapse of a bridge in Vessen"),
       ("point", (1987, 2, 2)), ("coord", 47.0, 8.0), sitelinks={"en": "Vessen Bridge collapse"}, mentions={"en": 5}),
    Ev("Q900503", _l("Battle of Rivers", "Schlacht an den Flüssen"), _l("battle in 1644", "Schlacht 1644"),
       ("point", (1644, 7, 2)), ("coord", 50.0, 1.0), sitelinks={"en": "Battle of Rivers (1644)", "de": "Schlacht an den Flüssen"}),
    Ev("Q900504", _l("Battle of Rivers", "Flussschlacht"), _l("battle in 1812", "Schlacht 1812"),
       ("point", (1812, 8, 9)), ("coord", 52.0, 3.0), sitelinks={"en": "Battle of Rivers (1812)", "de": "Flussschlacht"}),
    Ev("Q900505", _l("Orlen strike", "Orlen-Streik", "Grève d'Orlen", "Huelga de Orlen"), _l("general strike", "Generalstreik", "grève générale", "huelga general"),
       ("span", (1972, 3, 1), (1972, 3, 20)), ("loc", "Q900904"), sitelinks={"de": "Orlen-Streik", "fr": "Grève d'Orlen", "es": "Huelga de Orlen"},
       mentions={"de": 3, "fr": 2}),
    Ev("Q900506", _l("Torvik mine disaster", "Grubenunglück von Torvik"), _l("mining accident", "Grubenunglück"),
       ("point", (1961, 11, 2)), ("coord", 60.0, 10.0), lead="", mentions={"en": 4}),
    Ev("Q900507", _l("Dunmore fair fire", "Brand auf dem Markt von Dunmore"), _l("fire at a fair", "Brand auf einem Markt"),
       ("point", (1923, 9, 9)), ("coord", 53.0, -6.0), sitelinks={"en": "Dunmore Fair fire (1923)", "de": "Brand auf dem Markt von Dunmore"}),
    # Mention-level failures.
    Ev("Q900600", _l("Pellham bread riots", "Brotunruhen von Pellham"), _l("food riots", "Hungerunruhen"),
       ("span", (1847, 5, 1), (1847, 5, 9)), ("loc", "Q900904"), anchors={"en": ["bread riots"]}, mentions={"en": 2, "de": 1}),
    Ev("Q900601", _l("Greyhaven blackout", "Stromausfall von Greyhaven"), _l("power outage", "Stromausfall"),
       ("point", (2003, 8, 14)), ("loc", "Q900904"), anchors={"en": ["Greyhaven blackout"], "de": ["Stromausfall von Greyhaven"]},
       mentions={"en": 4, "de": 2}),
]

# Non-events: places, a person, a comet sighting without location, a property.
NON_EVENTS = [
    ("Q900900", "Valdoria", "country in the fixture world", {"P625": (44.5, 12.0), "P31": "Q6256"}),
    ("Q900901", "Kessel", "town in Valdoria", {"P625": (45.5, 11.1), "P31": "Q3957"}),
    ("Q900902", "Anton Greve", "Valdorian general", {"P569": (1880, 3, 2), "P31": "Q5"}),
    ("Q900903", "Comet Halvard sighting", "sighting of a comet in 1910", {"P585": (1910, 5, 18), "P31": "Q1190554"}),
    ("Q900904", "Harlow", "city on the Esk", {"P625": (51.0, -3.0), "P31": "Q515"}),
    ("Q900905", "Marrow", "fortified town", {"P625": (45.6, 11.3), "P31": "Q3957"}),
    ("Q900906", "Esk coast", "coastline", {"P625": (51.3, -3.0)}),
    ("Q900907", "Lindmoor", "moorland", {"P625": (52.3, -1.0)}),
]

# Redirects per language: redirect title -> target title.
REDIRECTS = {
    "en": {"Kessel Ford battle": "Battle of Kessel Ford", "Aurelian war": "Aurelian War", "Harlow Marathon 1999": "1999 Harlow Marathon",
           "Calder treaty": "Treaty of Calder", "Valdorian Republic": "Valdoria"},
    "de": {"Kesselfurt": "Schlacht an der Kesselfurt", "Aurelienkrieg": "Aurelischer Krieg"},
    "fr": {"Guerre Aurélienne": "Guerre aurélienne"},
    "es": {"Terremoto de Ostrava": "Terremoto del valle de Ostrava de 2011"},
}

EXPECTED = {
    # pruning reason per dropped candidate
    "pruned": {
        "Q900500": "is_class", "Q900501": "no_english_label", "Q900502": "single_language",
        "Q900503": "duplicate_english_label", "Q900504": "duplicate_english_label", "Q900505": "no_english_article",
        "Q900506": "no_english_description", "Q900507": "no_english_description",
    },
    "non_events": ["Q900900", "Q900901", "Q900902", "Q900903", "Q900904", "Q900905", "Q900906", "Q900907"],
    "mention_dropped": {"Q900600": "too_few_mentions", "Q900601": "mostly_title_mentions"},
    # tree parent after the height-3 cut (child -> parent)
    "parents": {"Q900101": "Q900100", "Q900102": "Q900100", "Q900103": "Q900101", "Q900104": "Q900101", "Q900105": "Q900102",
                "Q900201": "Q900200", "Q900202": "Q900201", "Q900204": "Q900203"},
    "cut_edges": [("Q900203", "Q900202")],
    # connected components over P361/P527/P155/P156 (of kept events with >=1 relation)
    "components": [
        {"Q900100", "Q900101", "Q900102", "Q900103", "Q900104", "Q900105", "Q900403"},
        {"Q900200", "Q900201", "Q900202", "Q900203", "Q900204"},
        {"Q900300", "Q900301", "Q900302"},
    ],
}

# Filler sentences per language: realistic prose around the links, with markup noise.
FILLER = {
    "en": [
        "Contemporary newspapers in [[Valdoria]] gave the matter extensive coverage over the following weeks.",
        "Historians have since debated the significance of these developments for the region's economy.<ref>{{cite book|title=A History of the Region|year=1988|page=112}}</ref>",
        "Local archives hold letters, maps and photographs from the period, many of them '''unpublished'''.",
        "The municipal council later commissioned a memorial near the old market square.",
        "Several accounts describe the weather as ''unusually cold'' for the season.",
        "Travellers reported that roads to {{convert|40|km|mi}} outside the town were closed.",
    ],
    "de": [
        "Zeitgenössische Zeitungen in [[Valdoria]] berichteten in den folgenden Wochen ausführlich darüber.",
        "Historiker diskutieren bis heute die Bedeutung dieser Entwicklungen für die Wirtschaft der Region.",
        "Im Stadtarchiv liegen Briefe, Karten und Fotografien aus dieser Zeit, viele davon '''unveröffentlicht'''.",
        "Der Stadtrat ließ später ein Denkmal in der Nähe des alten Marktplatzes errichten.",
    ],
    "fr": [
        "Les journaux de l'époque en [[Valdorie]] ont largement couvert l'affaire pendant des semaines.",
        "Les historiens discutent encore de l'importance de ces événements pour l'économie de la région.",
        "Les archives locales conservent des lettres, des cartes et des photographies de cette période.",
        "Le conseil municipal fit ensuite ériger un monument près de l'ancienne place du marché.",
    ],
    "es": [
        "Los periódicos de la época en [[Valdoria]] cubrieron ampliamente el asunto durante semanas.",
        "Los historiadores todavía debaten la importancia de estos hechos para la economía de la región.",
        "Los archivos locales conservan cartas, mapas y fotografías de ese periodo.",
        "El ayuntamiento mandó construir más tarde un monumento cerca de la antigua plaza del mercado.",
    ],
}
OPENERS = {
    "en": "In {year}, the chronicle of {host} records {link} as a turning point for the inhabitants.",
    "de": "Im Jahr {year} verzeichnet die Chronik von {host} {link} als Wendepunkt für die Bewohner.",
    "fr": "En {year}, la chronique de {host} mentionne {link} comme un tournant pour les habitants.",
    "es": "En {year}, la crónica de {host} menciona {link} como un punto de inflexión para los habitantes.",
}
NO_NUMBER_OPENER = {
    "en": "The chronicle of {host} records {link} as a turning point for the inhabitants of the valley.",
}
HOSTS = {
    "en": ["History of Valdoria", "Kessel", "Harlow", "Lindmoor", "Esk coast", "Valdorian press", "Marrow", "Timeline of Valdoria"],
    "de": ["Geschichte Valdorias", "Kessel (Stadt)", "Harlow", "Lindmoor"],
    "fr": ["Histoire de la Valdorie", "Kessel (ville)", "Harlow"],
    "es": ["Historia de Valdoria", "Kessel (ciudad)", "Harlow"],
}


@dataclass
class World:
    entities: list[dict]
    old_format: set[str]  # qids written in the old dump form
    pages: dict[str, list[Page]]  # Wikipedia, per language
    news: dict[str, list[Page]]  # Wikinews, per language
    seed: int

    def backend(self) -> MemoryBackend:
        return MemoryBackend(self.entities, self.pages, self.news, name="memory-world")


# --- Wikidata entity JSON -------------------------------------------------------------------
def _item_value(qid: str, old: bool) -> dict:
    v = {"entity-type": "item", "numeric-id": int(qid[1:])}
    if not old:
        v["id"] = qid
    return {"value": v, "type": "wikibase-entityid"}


def _time_value(y: int, m: int, d: int, old: bool) -> dict:
    t = f"+{y:011d}-{m:02d}-{d:02d}T00:00:00Z" if old else f"+{y:04d}-{m:02d}-{d:02d}T00:00:00Z"
    return {"value": {"time": t, "timezone": 0, "before": 0, "after": 0, "precision": 11,
                      "calendarmodel": "http://www.wikidata.org/entity/Q1985727"}, "type": "time"}


def _claim(qid: str, prop: str, datatype: str, datavalue: dict, n: int) -> dict:
    h = hashlib.sha1(f"{qid}{prop}{n}".encode()).hexdigest()
    return {"mainsnak": {"snaktype": "value", "property": prop, "hash": h, "datavalue": datavalue, "datatype": datatype},
            "type": "statement", "id": f"{qid}${h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}", "rank": "normal"}


def _entity(qid, labels, descs, claims_spec, sitelinks, old, n):
    claims: dict[str, list] = {}
    for i, (prop, dt, dv) in enumerate(claims_spec):
        claims.setdefault(prop, []).append(_claim(qid, prop, dt, dv, i))
    ent = {
        "type": "item", "id": qid,
        "labels": {k: {"language": k, "value": v} for k, v in labels.items()},
        "descriptions": {k: {"language": k, "value": v} for k, v in descs.items()},
        "aliases": {},
        "claims": claims,
        "sitelinks": {f"{k}wiki": {"site": f"{k}wiki", "title": t, "badges": []} for k, t in sitelinks.items()},
    }
    if not old:  # current dumps carry page metadata; the 2014 form did not
        ent.update({"pageid": 1000 + n, "ns": 0, "title": qid, "lastrevid": 2_000_000 + n, "modified": "2026-10-30T12:00:00Z"})
    return ent


def _event_entity(ev: Ev, n: int) -> dict:
    old = ev.old_format
    spec = [("P31", "wikibase-item", _item_value(c, old)) for c in ev.p31]
    if ev.when:
        if ev.when[0] == "point":
            spec.append(("P585", "time", _time_value(*ev.when[1], old)))
        elif ev.when[0] == "span":
            spec.append(("P580", "time", _time_value(*ev.when[1], old)))
            spec.append(("P582", "time", _time_value(*ev.when[2], old)))
        elif ev.when[0] == "duration":
            spec.append(("P2047", "quantity", {"value": {"amount": f"+{ev.when[1]}", "unit": "http://www.wikidata.org/entity/Q573"}, "type": "quantity"}))
    if ev.where:
        if ev.where[0] == "loc":
            spec.append(("P276", "wikibase-item", _item_value(ev.where[1], old)))
        else:
            spec.append(("P625", "globe-coordinate", {"value": {"latitude": ev.where[1], "longitude": ev.where[2], "altitude": None,
                                                                "precision": 0.01, "globe": "http://www.wikidata.org/entity/Q2"}, "type": "globecoordinate"}))
    for prop, vals in (("P361", ev.part_of), ("P527", ev.has_part), ("P155", ev.follows), ("P156", ev.followed_by)):
        spec += [(prop, "wikibase-item", _item_value(v, old)) for v in vals]
    spec.append(("P18", "commonsMedia", {"value": f"{ev.labels.get('en', ev.qid)}.jpg", "type": "string"}))
    return _entity(ev.qid, ev.labels, ev.desc, spec, _sitelinks(ev), old, n)


def _sitelinks(ev: Ev) -> dict[str, str]:
    return dict(ev.sitelinks) if ev.sitelinks is not None else dict(ev.labels)


def _non_event_entity(qid, label, desc, props, n):
    spec = []
    for p, v in props.items():
        if p == "P625":
            spec.append(("P625", "globe-coordinate", {"value": {"latitude": v[0], "longitude": v[1], "altitude": None, "precision": 0.1,
                                                                "globe": "http://www.wikidata.org/entity/Q2"}, "type": "globecoordinate"}))
        elif p in ("P585", "P569"):
            spec.append((p, "time", _time_value(*v, False)))
        else:
            spec.append((p, "wikibase-item", _item_value(v, False)))
    return _entity(qid, {"en": label, "de": label}, {"en": desc}, spec, {"en": label, "de": label}, False, n)


# --- Wikipedia pages --------------------------------------------------------------------------
class _Ids:
    def __init__(self, start: int):
        self.n = start

    def __call__(self) -> int:
        self.n += 1
        return self.n


def _event_article(ev: Ev, lang: str, title: str, rng: random.Random, by_qid: dict[str, Ev]) -> str:
    year = ev.year() or 1900
    infobox = ("{{Infobox event\n| name = " + title + "\n| image = " + title + ".jpg\n\n| date = " + str(year) +
               "\n| place = [[Valdoria]]\n}}\n")
    if lang == "en" and ev.lead == "":
        return infobox + "\n== References ==\n{{reflist}}\n[[Category:Events]]\n"
    desc = ev.desc.get(lang) or ev.desc.get("en", "")
    lead = f"'''{title}''' ({year}) was a {desc}.<ref>Archive note.</ref> " + " ".join(rng.sample(FILLER[lang], 2))
    # links from event articles to related events: must never become mentions
    rel = [by_qid[q] for q in ev.part_of + ev.has_part + ev.follows + ev.followed_by if q in by_qid]
    second = " ".join(f"See also [[{r.labels.get(lang, r.labels.get('en', ''))}]]." for r in rel if lang in _sitelinks(r))
    body = f"{infobox}{lead}\n\n{second or FILLER[lang][0]} {FILLER[lang][1]}\n\n== Background ==\n{FILLER[lang][2]} {FILLER[lang][3]}\n"
    return body + f"\n[[Category:{year} events]]\n[[{'de' if lang != 'de' else 'en'}:{title}]]\n"


def _link_markup(target: str, anchor: str | None, style: int, redirect: str | None) -> str:
    """Vary how a link is written; every form resolves to the same article."""
    if style == 0 or anchor is None:
        return f"[[{target}|{anchor}]]" if anchor and anchor != target else f"[[{target}]]"
    if style == 1:
        return f"[[{target.replace(' ', '_')}|{anchor}]]"
    if style == 2:
        return f"[[{target[:1].lower() + target[1:]}|{anchor}]]"
    if style == 3 and redirect:
        return f"[[{redirect}|{anchor}]]"
    if style == 4:
        return f"[[{target}#Aftermath|{anchor}]]"
    return f"[[{target}|{anchor}]]"


def _anchor_text(markup: str, target: str) -> str:
    inner = markup[2:-2]
    return inner.split("|", 1)[1] if "|" in inner else target


def build_world(seed: int = 13) -> World:
    rng = random.Random(seed)
    by_qid = {e.qid: e for e in EVENTS}
    entities: list[dict] = []
    for n, ev in enumerate(EVENTS):
        entities.append(_event_entity(ev, n))
    for n, (qid, label, desc, props) in enumerate(NON_EVENTS):
        entities.append(_non_event_entity(qid, label, desc, props, 100 + n))
    old = {e.qid for e in EVENTS if e.old_format}

    pages: dict[str, list[Page]] = {}
    for li, lang in enumerate(LANGS):
        ids = _Ids(10_000 * (li + 1))
        out: list[Page] = []
        redirects_by_target = {v: k for k, v in REDIRECTS.get(lang, {}).items()}
        for ev in EVENTS:
            title = _sitelinks(ev).get(lang)
            if title and not (lang == "en" and ev.qid == "Q900507"):  # Q900507's English sitelink points nowhere
                out.append(Page(lang, title, ids(), _event_article(ev, lang, title, rng, by_qid), revision_id=ids() + 500_000,
                                timestamp="2026-10-01T00:00:00Z"))
        for rt, tgt in REDIRECTS.get(lang, {}).items():
            out.append(Page(lang, rt, ids(), f"#REDIRECT [[{tgt}]]\n{{{{R from alternative name}}}}", redirect_to=normalize_title(tgt),
                            revision_id=ids() + 500_000))
        # host articles: paragraphs with links to events
        hosts = HOSTS[lang]
        paras: dict[str, list[str]] = {h: [] for h in hosts}
        k = 0
        for ev in EVENTS:
            n_m = ev.mentions.get(lang, 0)
            title = _sitelinks(ev).get(lang) or ev.labels.get(lang)
            if not n_m or not title:
                continue
            anchors = ev.anchors.get(lang, [])
            if ev.qid == "Q900601":  # mostly-title mentions
                cycle = [title] * (n_m - 1) + [f"{title} of that year"]
            else:
                cycle = (anchors + [title] + anchors) if anchors else [title]
            for i in range(n_m):
                anchor = cycle[i % len(cycle)]
                style = (i + k) % 6
                markup = _link_markup(title, anchor, style, redirects_by_target.get(title))
                year = ev.year() or 1904
                host = hosts[k % len(hosts)]
                k += 1
                text = OPENERS[lang].format(year=year, host=host, link=markup) + " " + " ".join(rng.sample(FILLER[lang], 2))
                paras[host].append(text)
        # special paragraphs exercising the filters (English)
        if lang == "en":
            paras["Harlow"].append(NO_NUMBER_OPENER["en"].format(host="Harlow", link="[[1999 Harlow Marathon|that year's marathon]]") + " " + FILLER["en"][3])
            paras["Harlow"].append("In 2005 the organisers compared the course with the [[1999 Harlow Marathon|1999 race]], " + FILLER["en"][0])
            paras["Kessel"].append("Short note on [[Battle of Kessel Ford|the battle]].")  # context < 100 chars
            paras["Kessel"].append("In 1931 " + ("the valley saw [[Battle of Kessel Ford|Kessel Ford]] fighting; " + " ".join(FILLER["en"][:4]) + " ") * 6)  # > 2000 chars
            # the same (event, language, mention string) many times: capped at max_contexts_per_mention
            for j in range(4):
                paras["Timeline of Valdoria"].append(
                    f"In {1931 + j}, a timeline entry (no. {j}) recalls the [[Battle of Kessel Ford|Kessel Ford]] clash. " + " ".join(FILLER["en"][j:j + 2]))
            # a link inside a file caption and inside a template: not paragraph prose
            paras["Marrow"].append("[[File:Marrow walls.jpg|thumb|Walls after the [[Siege of Marrow]] in 1932]]\n{{Main|Siege of Marrow}}")
        for hi, host in enumerate(hosts):
            body = ("{{Infobox settlement\n| name = " + host + "\n| map = [[File:Map.svg|200px]]\n\n| founded = 1200\n}}\n"
                    f"'''{host}''' is a place in the fixture world. " + FILLER[lang][0] + "\n\n")
            for j, p in enumerate(paras[host]):
                if j and j % 3 == 0:
                    body += f"== Section {j // 3} ==\n"
                body += p + "\n\n"
            body += "* list item without links\n<!-- a comment with [[Aurelian War]] inside -->\n"
            body += f"[[Category:{host}]]\n[[fr:{host}]]\n"
            out.append(Page(lang, normalize_title(host), ids(), body, revision_id=ids() + 500_000, timestamp="2026-10-02T00:00:00Z"))
        out.append(Page(lang, "Talk:" + hosts[0], ids(), "Discussion of [[Aurelian War]] " * 20, ns=1))
        pages[lang] = out

    news = _wikinews(rng)
    return World(entities, old, pages, news, seed)


def _wikinews(rng: random.Random) -> dict[str, list[Page]]:
    en = [
        ("Earthquake strikes Ostrava Vale", "March 4, 2011",
         "{{date|March 4, 2011}}\nAn {{w|2011 Ostrava Vale earthquake|earthquake}} of magnitude 6.1 struck the valley on Thursday, 2011. "
         "Rescue teams from [[w:Harlow|Harlow]] arrived within hours and reported damage to bridges and houses across the region.\n\n"
         "Officials said the {{w|2011 Ostrava Vale earthquake}} was the strongest in the region since 1911, and that schools would remain closed.\n\n"
         "== Sources ==\n* {{source|url=http://example.org|title=Quake}}\n"),
        ("Harlow Marathon draws record crowd", "April 19, 1998",
         "{{date|April 19, 1998}}\nThousands lined the streets on Sunday as the [[w:1998 Harlow Marathon|1998 race]] passed the harbour of Harlow in 1998. "
         "Organisers said the number of runners in the event had doubled since 1990 and praised the volunteers.\n\n"
         "Short line about [[wikipedia:1998 Harlow Marathon|it]].\n"),
        ("Historians revisit Treaty of Calder", "February 1, 2026",
         "{{date|February 1, 2026}}\nA conference in Marrow marked the anniversary of the {{w|Treaty of Calder|peace treaty}} that ended the "
         "{{w|Aurelian war|Aurelian War}} in 1935. Speakers discussed the archives of the period and new findings about the negotiations.\n"),
        ("Flood memorial opened", "June 2, 2024",
         "{{date|June 2, 2024}}\nA memorial for the victims of the [[:w:Great Flood of Lindmoor|great flood]] was opened on Sunday near the river, "
         "more than a hundred years after the waters rose; the mayor thanked the families who donated photographs.\n"),
    ]
    de = [
        ("Erdbeben erschüttert das Ostrava-Tal", "4. März 2011",
         "Ein [[w:Erdbeben im Ostrava-Tal 2011|Erdbeben]] der Stärke 6,1 hat am Donnerstag das Tal erschüttert. Rettungskräfte aus Harlow "
         "trafen nach wenigen Stunden ein und meldeten Schäden an Brücken und Häusern im Jahr 2011.\n"),
    ]
    out = {}
    for li, (lang, items) in enumerate((("en", en), ("de", de))):
        pages = []
        for i, (title, date, text) in enumerate(items):
            cats = (date, "Published", "Archived") if i % 2 == 0 else (date, "Published")
            pages.append(Page(lang, title, 70_000 + 100 * li + i, text, categories=cats, project="wikinews",
                              revision_id=80_000 + 100 * li + i, timestamp="2026-10-03T00:00:00Z"))
        pages.append(Page(lang, "Main Page", 70_090 + li, "Welcome to Wikinews.", categories=(), project="wikinews"))
        out[lang] = pages
    return out


# --- dump files -------------------------------------------------------------------------------
def wikidata_lines(world: World) -> list[bytes]:
    return [json.dumps(e, ensure_ascii=False, separators=(",", ":")).encode("utf-8") for e in world.entities]


def write_wikidata_dump(path: Path, lines: list[bytes], stream_count: int = 5) -> Path:
    """One entity per line inside a JSON array, as the real dumps (``[``, ``{..},`` ..., ``{..}``, ``]``)."""
    body = b"[\n" + b",\n".join(lines) + b"\n]\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wb") as f:
            f.write(body)
    elif path.name.endswith(".bz2"):
        # multi-stream, cut at arbitrary byte positions (lines straddle streams), so it can be sharded
        with open(path, "wb") as f:
            step = max(1, len(body) // stream_count)
            for i in range(0, len(body), step):
                f.write(bz2.compress(body[i:i + step]))
    else:
        path.write_bytes(body)
    return path


def _page_xml(p: Page) -> str:
    red = f'    <redirect title={quoteattr(p.redirect_to)} />\n' if p.redirect_to else ""
    ts = p.timestamp or "2026-10-01T00:00:00Z"
    return (f"  <page>\n    <title>{escape(p.title)}</title>\n    <ns>{p.ns}</ns>\n    <id>{p.page_id}</id>\n{red}"
            f"    <revision>\n      <id>{p.revision_id or p.page_id + 1}</id>\n      <timestamp>{ts}</timestamp>\n"
            f"      <contributor>\n        <username>Fixture</username>\n        <id>1</id>\n      </contributor>\n"
            f"      <model>wikitext</model>\n      <format>text/x-wiki</format>\n"
            f'      <text bytes="{len(p.wikitext.encode())}" xml:space="preserve">{escape(p.wikitext)}</text>\n'
            f"      <sha1>{hashlib.sha1(p.wikitext.encode()).hexdigest()}</sha1>\n    </revision>\n  </page>\n")


def _header(dbname: str, lang: str, sitename: str) -> str:
    return (f'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11" xml:lang="{lang}">\n'
            f"  <siteinfo>\n    <sitename>{sitename}</sitename>\n    <dbname>{dbname}</dbname>\n    <case>first-letter</case>\n"
            '    <namespaces>\n      <namespace key="0" case="first-letter" />\n      <namespace key="1" case="first-letter">Talk</namespace>\n'
            "    </namespaces>\n  </siteinfo>\n")


def write_multistream(path: Path, index_path: Path, pages: list[Page], dbname: str, lang: str, *, per_stream: int = 7,
                      sitename: str = "Wikipedia") -> None:
    """pages-articles-multistream: header stream, streams of ``per_stream`` pages, footer stream; index ``offset:id:title``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    index_lines = []
    with open(path, "wb") as f:
        f.write(bz2.compress(_header(dbname, lang, sitename).encode()))
        for i in range(0, len(pages), per_stream):
            off = f.tell()
            chunk = pages[i:i + per_stream]
            f.write(bz2.compress("".join(_page_xml(p) for p in chunk).encode()))
            index_lines += [f"{off}:{p.page_id}:{p.title}" for p in chunk]
        f.write(bz2.compress(b"</mediawiki>\n"))
    with bz2.open(index_path, "wt", encoding="utf-8") as f:
        f.write("\n".join(index_lines) + "\n")


def _sql_str(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def write_categorylinks(path: Path, pages: list[Page]) -> None:
    """A ``categorylinks.sql.gz`` in the classic MediaWiki layout (cl_from, cl_to, ...)."""
    rows = []
    for p in pages:
        for c in p.categories:
            rows.append(f"({p.page_id},{_sql_str(c.replace(' ', '_'))},{_sql_str(p.title.upper())},'2026-10-03 00:00:00','','uppercase','page')")
    sql = ("-- MySQL dump 10.19\n/*!40101 SET NAMES binary*/;\nDROP TABLE IF EXISTS `categorylinks`;\n"
           "CREATE TABLE `categorylinks` (\n  `cl_from` int(8) unsigned NOT NULL DEFAULT 0,\n  `cl_to` varbinary(255) NOT NULL DEFAULT '',\n"
           "  `cl_sortkey` varbinary(230) NOT NULL DEFAULT '',\n  `cl_timestamp` timestamp NOT NULL,\n  `cl_sortkey_prefix` varbinary(255) NOT NULL DEFAULT '',\n"
           "  `cl_collation` varbinary(32) NOT NULL DEFAULT '',\n  `cl_type` enum('page','subcat','file') NOT NULL DEFAULT 'page'\n);\n")
    for i in range(0, len(rows), 3):  # several INSERT statements, as real dumps have
        sql += "INSERT INTO `categorylinks` VALUES " + ",".join(rows[i:i + 3]) + ";\n"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(sql)


def write_dumps(world: World, out_dir: str | Path, *, wikidata_compression: str = "gz", date: str = DUMP_DATE) -> dict:
    """Write the world as dump files; returns the layout ``DumpBackend`` takes (see ``dumps.DumpPaths``)."""
    out = Path(out_dir)
    wd = write_wikidata_dump(out / "wikidata" / f"wikidata-{date}-all.json.{wikidata_compression}", wikidata_lines(world))
    wiki, news = {}, {}
    for lang, pages in world.pages.items():
        db = f"{lang}wiki"
        x = out / db / f"{db}-{date}-pages-articles-multistream.xml.bz2"
        idx = out / db / f"{db}-{date}-pages-articles-multistream-index.txt.bz2"
        write_multistream(x, idx, pages, db, lang)
        wiki[lang] = {"xml": str(x), "index": str(idx)}
    for lang, pages in world.news.items():
        db = f"{lang}wikinews"
        x = out / db / f"{db}-{date}-pages-meta-current.xml.bz2"
        x.parent.mkdir(parents=True, exist_ok=True)
        with bz2.open(x, "wt", encoding="utf-8") as f:
            f.write(_header(db, lang, "Wikinews") + "".join(_page_xml(p) for p in pages) + "</mediawiki>\n")
        cl = out / db / f"{db}-{date}-categorylinks.sql.gz"
        write_categorylinks(cl, pages)
        news[lang] = {"xml": str(x), "categorylinks": str(cl)}
    return {"wikidata": str(wd), "wikipedia": wiki, "wikinews": news, "dates": {"wikidata": date, "wikipedia": date, "wikinews": date}}
