"""Build FOLDOC-Bool-dev: Boolean retrieval questions over the Free On-line Dictionary of Computing.

    python scripts/devsets/foldoc.py --out results/devsets/foldoc
    python scripts/devsets/foldoc.py --out DIR --dict foldoc.dict.dz --index foldoc.index --seed 0

Reads the dictd files of FOLDOC (Debian package `dict-foldoc`, GNU FDL) and writes a
development set in the project's folder layout (corpus.jsonl, eval.jsonl, stats.json,
README.md), which `boolcl evaluate MODEL data=DIR` reads. It is for choosing settings:
never train on it.

Every label comes from FOLDOC's own structure: an entry's category tags (<language>,
<company>, ...) and its {cross-references}. A passage is "related to" an entry R when its
text, as it stands in the corpus (cleaned, cut to about 120 words), links to R.

- NOT: a category K and a hub R linked from 3-25 entries of K; one of them, B, is excluded.
  Positives: the other entries of K linking to R; negative: B.
- AND: entries of K linking to both R1 and R2; negatives: entries of K linking to exactly
  one of them (and not naming the other), up to 4.
- OR: entries of K linking to R1 or R2 (at most one links to both); negatives: 1-3 other
  entries of K linking to neither (nor naming them) but sharing another hub with a positive.

A link counts for the category of its own sense (numbered senses carry their own tags).
Hubs are tagged entries with a proper name or a name of several words ("Perl", "page fault",
not "bit"), linked from at most 200 entries in all, and not in category K themselves; names
that are the headword of more than one entry are not used. The corpus holds every labelled
entry plus other entries of the same categories, chosen by the seeded generator, up to
--max-passages. The data files themselves are never copied anywhere but the output folder.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dictd import DictdError, check_span, read_dict, read_index, write_whole  # noqa: E402

from boolcl.errors import ConfigError  # noqa: E402

NAME = "FOLDOC-Bool-dev"
DEFAULT_DICT = Path("/usr/share/dictd/foldoc.dict.dz")
DEFAULT_INDEX = Path("/usr/share/dictd/foldoc.index")
INSTALL_HINT = "install FOLDOC with `apt-get install dict-foldoc`, or give --dict and --index"

MAX_WORDS = 120  # a passage is its headword plus about this many words of definition
MIN_WORDS = 8  # shorter definitions (pointers to another entry) are left out
MAX_HUB_REFS = 200  # hubs linked from more entries than this are too generic to ask about
NOT_REFS = (3, 25)  # entries of K that link to a NOT hub
AND_MAX_HUB_REFS = 40  # entries of K linking to each AND / OR hub, at most
OR_MAX_HUB_REFS = 8  # entries of K linking to each OR hub, at most
OR_MAX_POSITIVES = 10
AND_MAX_NEGATIVES = 4
OR_MAX_NEGATIVES = 3
CATEGORY_SHARE = 0.2  # one category gives at most this share of a type's questions (first pass)
HUB_USES = 2  # a hub is named in at most this many questions of one type

# Category tag -> how a question names its members. Tags that read badly as a noun are left out.
NOUNS = {
    "language": "programming language",
    "networking": "networking term",
    "programming": "programming term",
    "jargon": "jargon term",
    "hardware": "hardware term",
    "operating system": "operating systems term",
    "standard": "standard",
    "tool": "software tool",
    "communications": "communications term",
    "company": "company",
    "storage": "storage term",
    "mathematics": "mathematical term",
    "database": "database term",
    "protocol": "protocol",
    "body": "organisation",
    "graphics": "graphics term",
    "web": "web term",
    "processor": "processor term",
    "computer": "computer",
    "messaging": "messaging term",
    "algorithm": "algorithm",
    "architecture": "computer architecture term",
    "person": "person",
    "security": "security term",
    "text": "text processing term",
    "theory": "computing theory term",
    "file format": "file format",
    "electronics": "electronics term",
    "games": "games term",
    "library": "software library",
    "cryptography": "cryptography term",
    "artificial intelligence": "artificial intelligence term",
    "file system": "file system term",
    "product": "software product",
}

TEMPLATES = {
    "not": ["Which {noun} is related to {r} but is not {b}?",
            "{A} {noun} connected with {r}, other than {b}",
            "Name {a} {noun} that refers to {r}, excluding {b}.",
            "Find {a} {noun} linked to {r} that is not {b}."],
    "and": ["Which {noun} is related to both {r1} and {r2}?",
            "{A} {noun} connected with {r1} and also with {r2}",
            "Name {a} {noun} that refers to both {r1} and {r2}.",
            "Find {a} {noun} linked to {r1} as well as {r2}."],
    "or": ["{A} {noun} related to {r1} or {r2}",
           "Which {noun} is connected with either {r1} or {r2}?",
           "Name {a} {noun} that refers to {r1} or to {r2}.",
           "Find {a} {noun} linked to {r1} or {r2}."],
}

TAG_RE = re.compile(r"^(\d+\.\s*)?<([A-Za-z][A-Za-z0-9 ,\-]*)>\s*")
DATE_RE = re.compile(r"\(\d{4}-\d{2}-\d{2}\)\.?")
REF_RE = re.compile(r"\{([^{}]*)\}")
TARGET_RE = re.compile(r"^(.*?)\s*\(([^()]*)\)$", re.S)
LINK_RE = re.compile(r"://|^/|\.html?$|^news:|^mailto:|@|^ftp\.|^www\.")
BARE_URL_RE = re.compile(r"\(?\b(?:https?|ftp|news|mailto):\S+")
DROP_PARA_RE = re.compile(r"^(See also|See {|Usenet|\[|Home page|E-?mail|FTP|Mailing list|Web site|Compare)", re.I)
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 .,+#/&'()\-:!*]*")
SEE_ALSO_RE = re.compile(r"\s*\bSee also\b.*$", re.S)
NEWSGROUP_RE = re.compile(r"\{?Usenet\}? newsgroups?:?(\s*(and\s*)?\{?news:[^\s}]+\}?[,.]?)+", re.I)
BOOLEAN_WORDS = {"and", "or", "not", "xor", "nand", "nor", "but", "except", "either", "neither", "both", "other"}


FoldocError = DictdError  # a problem with the input files; the message names the file (and line)


@dataclass
class Entry:
    key: int  # ordinal in the dictionary file: docid foldoc-<key>
    headword: str  # the entry's first headword line, as printed
    aliases: list[str]  # index headwords (lower case) pointing at it
    tags: list[str]
    text: str  # cleaned definition, cut to about MAX_WORDS words
    words: int  # words in the cleaned definition before cutting
    kept_targets: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)  # links within `text`, with
    all_targets: list[str] = field(default_factory=list)  # their sense's tags; link targets of the whole entry
    refs: dict[int, set[str]] = field(default_factory=dict)  # entries linked from `text` -> tags of the senses
    all_refs: set[int] = field(default_factory=set)

    @property
    def doc(self) -> str:
        return f"{self.headword}: {self.text}"

    @property
    def docid(self) -> str:
        return f"foldoc-{self.key}"


# --------------------------------------------------------------------------- reading


# --------------------------------------------------------------------------- parsing


def is_link(target: str) -> bool:
    return bool(LINK_RE.search(target.strip()))


def norm(name: str) -> str:
    return " ".join(name.lower().split())


def clean_paragraph(p: str) -> tuple[str, list[tuple[int, str]]]:
    """Text without markup, and (word position, link target) of each cross-reference."""
    out = ""
    refs: list[tuple[int, str]] = []
    link_words = 0
    pos = 0
    for m in REF_RE.finditer(p):
        out += BARE_URL_RE.sub("", p[pos:m.start()])
        pos = m.end()
        inner = " ".join(m.group(1).split())
        t = TARGET_RE.match(inner)
        if t and (is_link(t.group(2)) or t.group(1)):
            display, target = t.group(1), t.group(2)
        else:
            display, target = inner, inner
        if is_link(target):
            if p[pos:pos + 1] in ("", "."):  # "... {wiki entry (http://...)}." : a link, not a sentence
                pos += 1
                continue
            link_words += len(display.split())
            out += display
            continue
        start = len(out.split()) - (0 if (not out or out[-1].isspace()) else 1)
        refs.append((max(start, 0), target))
        out += display
    out += BARE_URL_RE.sub("", p[pos:])
    out = " ".join(out.replace("__", "").split())
    out = re.sub(r"\s+([.,;:])(?=\s|$)", r"\1", out)  # "{Unix} ." left by a dropped link
    words = len(out.split())
    if link_words and link_words * 2 >= words:  # a paragraph of links: home pages, FTP sites
        return "", []
    return out, refs


def parse_entry(raw: str) -> tuple[str, list[str], str, list[tuple[int, str, tuple[str, ...]]]]:
    """(headword, tags, cleaned definition, [(word position, target, tags of its sense)]).

    A numbered paragraph ("2. <language> ...") starts a sense with its own tags; without a tag
    it takes the entry's (a tag before the numbering). A link counts for its own sense's tags,
    so "AM" (1. amplitude modulation; 2. <artificial intelligence> a program) links nothing
    from sense 1 into artificial intelligence."""
    raw = raw.replace("\r", "").lstrip("\n")
    head_part, _, body = raw.partition("\n\n")
    heads = [h.strip() for h in head_part.split("\n") if h.strip()]
    headword = heads[0] if heads else ""
    tags: list[str] = []
    entry_tags: tuple[str, ...] = ()
    current: tuple[str, ...] = ()
    texts: list[str] = []
    refs: list[tuple[int, str, tuple[str, ...]]] = []
    nwords = 0
    for para in re.split(r"\n[ \t]*\n", body):
        p = " ".join(para.split())
        if not p or DATE_RE.fullmatch(p):
            continue
        numbered = re.match(r"\d+\.\s", p) is not None
        m = TAG_RE.match(p)
        if m:
            found = tuple(t.strip() for t in m.group(2).split(",") if t.strip())
            tags.extend(found)
            p = (m.group(1) or "") + p[m.end():]
            current = found
            if not m.group(1):
                entry_tags = found
        elif numbered:
            current = entry_tags
        p = DATE_RE.sub("", p).strip() if p.endswith(")") else p
        if not p or DROP_PARA_RE.match(p):
            continue
        p = NEWSGROUP_RE.sub("", SEE_ALSO_RE.sub("", p)).strip()
        text, prefs = clean_paragraph(p)
        if not re.search(r"[A-Za-z]", text):
            continue
        texts.append(text)
        refs.extend((nwords + i, t, current) for i, t in prefs)
        nwords += len(text.split())
    return headword, list(dict.fromkeys(tags)), " ".join(texts), refs


def cut(text: str, max_words: int = MAX_WORDS) -> str:
    """The first `max_words` words, ending at a sentence end when one falls in the second half."""
    words = text.split()
    if len(words) <= max_words:
        return text
    kept = words[:max_words]
    for i in range(max_words, max_words // 2, -1):
        w = kept[i - 1]
        if w.endswith((".", "?", "!")) and not re.fullmatch(r"(e\.g|i\.e|etc|ca|cf|vs|Inc|Ltd|Corp|[A-Z])\.", w):
            return " ".join(kept[:i])
    return " ".join(kept)


def load_entries(dict_path: Path, index_path: Path) -> tuple[list[Entry], dict[str, list[int]], str]:
    """Every entry of the dictionary, cross-references resolved; the headword map; the edition line."""
    rows = read_index(index_path, INSTALL_HINT)
    data = read_dict(dict_path, INSTALL_HINT)
    spans: dict[tuple[int, int], list[str]] = {}
    for head, off, length, lineno in rows:
        check_span(head, off, length, lineno, data, index_path, dict_path)
        spans.setdefault((off, length), []).append(head)
    edition = ""
    entries: list[Entry] = []
    for key, ((off, length), heads) in enumerate(sorted(spans.items())):
        raw = data[off:off + length].decode("utf-8", errors="replace")
        if any(h.startswith("00-database") for h in heads):
            if "00-database-short" in heads:
                m = re.search(r"\(([^()]*\d{4})\)", raw)
                edition = m.group(1) if m else " ".join(raw.split("\n", 1)[-1].split())
            continue
        headword, tags, text, refs = parse_entry(raw)
        if not headword:
            continue
        kept = cut(text)
        n_kept = len(kept.split())
        entries.append(Entry(key, headword, sorted({norm(h) for h in heads}), tags, kept, len(text.split()),
                             [(t, tg) for i, t, tg in refs if i < n_kept], [t for _, t, _ in refs]))
    by_name: dict[str, list[int]] = defaultdict(list)
    for i, e in enumerate(entries):
        for name in {norm(e.headword), *e.aliases}:
            by_name[name].append(i)
    resolved: dict[str, int | None] = {}

    def resolve(target: str) -> int | None:
        t = norm(target)
        if t not in resolved:
            found = None
            for c in (t, t[:-3] + "y" if t.endswith("ies") else None, t[:-2] if t.endswith("es") else None,
                      t[:-1] if t.endswith("s") else None):
                if c and c in by_name:
                    found = by_name[c][0] if len(by_name[c]) == 1 else None  # ambiguous: no label
                    break
            resolved[t] = found
        return resolved[t]

    for i, e in enumerate(entries):
        for target, sense_tags in e.kept_targets:
            j = resolve(target)
            if j is not None and j != i:
                e.refs.setdefault(j, set()).update(sense_tags)
        e.all_refs = {j for j in map(resolve, e.all_targets) if j is not None and j != i}
    return entries, dict(by_name), edition


# --------------------------------------------------------------------------- questions


def article(noun: str) -> str:
    return "an" if noun[0].lower() in "aeiou" else "a"


def word(noun: str, template: str, **names: str) -> str:
    a = article(noun)
    text = template.format(noun=noun, a=a, A=a.capitalize(), **names)
    return text[:-1] if text.endswith("..") else text  # a name ending "Inc." closes the sentence


class Builder:
    def __init__(self, entries: list[Entry], by_name: dict[str, list[int]], seed: int, per_type: int):
        self.entries = entries
        self.by_name = by_name
        self.rng = random.Random(seed)
        self.per_type = per_type
        self.usable = [len(e.text.split()) >= MIN_WORDS for e in entries]
        inrefs = Counter(j for e in entries for j in e.all_refs)
        self.inrefs = inrefs
        self.members: dict[str, list[int]] = {
            k: [i for i, e in enumerate(entries) if self.usable[i] and k in e.tags] for k in NOUNS}
        self.name_ok = [self._name_ok(e) for e in entries]
        self._mention: dict[int, tuple[list[str], re.Pattern]] = {}
        self._lower: dict[int, str] = {}
        # linked_from[K][hub] = entries of K whose passage links to hub (hub eligible, not itself in K)
        self.linked_from: dict[str, dict[int, set[int]]] = {}
        for k, mem in self.members.items():
            d: dict[int, set[int]] = defaultdict(set)
            for i in mem:
                for h, sense_tags in entries[i].refs.items():
                    if k in sense_tags and self.hub_ok(h) and k not in entries[h].tags:
                        d[h].add(i)
            self.linked_from[k] = dict(d)
        self.pools: dict[str, int] = {}

    def _name_ok(self, e: Entry) -> bool:
        name = e.headword
        return (2 <= len(name) <= 60 and bool(NAME_RE.fullmatch(name)) and norm(name) not in BOOLEAN_WORDS
                and len(self.by_name.get(norm(name), ())) <= 1)

    def hub_ok(self, h: int) -> bool:
        """A hub has a usable name, a category tag (untagged entries are mostly jargon adjectives:
        "random", "logical") and is not linked from so many entries that it says nothing. Its name
        is a proper name (a capital or a digit: "Perl", "IBM 701") or has several words ("page
        fault"): a single common word ("bit", "software", "status") makes a vague question."""
        name = self.name(h)
        specific = bool(re.search(r"[A-Z0-9]", name)) or len(name.split()) > 1
        return self.name_ok[h] and specific and bool(self.entries[h].tags) and self.inrefs[h] <= MAX_HUB_REFS

    def name(self, i: int) -> str:
        return self.entries[i].headword

    def mentions(self, i: int, hub: int) -> bool:
        """Does passage i name the hub (any of its headwords) without linking to it?"""
        if hub not in self._mention:
            names = sorted({n for n in (norm(self.entries[hub].headword), *self.entries[hub].aliases) if len(n) >= 2},
                           key=len, reverse=True)
            pattern = re.compile(r"(?<![\w])(?:" + "|".join(map(re.escape, names)) + r")(?![\w])")
            self._mention[hub] = (names, pattern)
        names, pattern = self._mention[hub]
        low = self._lower.get(i)
        if low is None:
            low = self._lower[i] = " ".join(self.entries[i].text.lower().split())
        return any(n in low for n in names) and bool(pattern.search(low))

    def names(self, i: int, hub: int) -> bool:
        """Does passage i link to the hub in any sense, or name it?"""
        return hub in self.entries[i].refs or self.mentions(i, hub)

    def _pick(self, cands: list, once=lambda c: None) -> list:
        """Greedy, in candidate order: one category at most CATEGORY_SHARE of the questions in a
        first pass, then without that cap; a hub named at most HUB_USES times; `once(c)`, when
        not None, used by one question only (the excluded entry of NOT)."""
        chosen, hub_uses, cat_uses, seen, used = [], Counter(), Counter(), set(), set()
        cap = max(1, math.ceil(self.per_type * CATEGORY_SHARE))
        for capped in (True, False):
            for c in cands:
                if len(chosen) >= self.per_type:
                    return chosen
                if c["ident"] in seen or any(hub_uses[h] >= HUB_USES for h in c["hubs"]) or once(c) in used:
                    continue
                if capped and cat_uses[c["k"]] >= cap:
                    continue
                seen.add(c["ident"])
                chosen.append(c)
                cat_uses[c["k"]] += 1
                hub_uses.update(c["hubs"])
                if once(c) is not None:
                    used.add(once(c))
        return chosen

    def not_questions(self) -> list[dict]:
        cands = []
        for k in sorted(self.linked_from):
            for h, src in sorted(self.linked_from[k].items()):
                if not NOT_REFS[0] <= len(src) <= NOT_REFS[1]:
                    continue
                excl = [b for b in sorted(src) if self.name_ok[b] and norm(self.name(b)) != norm(self.name(h))]
                if not excl:
                    continue
                b = self.rng.choice(excl)
                cands.append({"k": k, "hubs": (h,), "b": b, "ident": (k, h),
                              "pos": sorted(src - {b}), "neg": [b]})
        self.pools["not"] = len(cands)
        self.rng.shuffle(cands)
        chosen = self._pick(cands, once=lambda c: c["b"])
        for c in chosen:
            c["question"] = word(NOUNS[c["k"]], self.rng.choice(TEMPLATES["not"]),
                                 r=self.name(c["hubs"][0]), b=self.name(c["b"]))
        return chosen

    def _pairs(self, k: str) -> dict[tuple[int, int], set[int]]:
        both: dict[tuple[int, int], set[int]] = defaultdict(set)
        lf = self.linked_from[k]
        for i in self.members[k]:
            hubs = sorted(h for h in self.entries[i].refs if h in lf and i in lf[h] and len(lf[h]) <= AND_MAX_HUB_REFS)
            for pair in itertools.combinations(hubs, 2):
                both[pair].add(i)
        return both

    def _distinct(self, h1: int, h2: int) -> bool:
        n1, n2 = norm(self.name(h1)), norm(self.name(h2))
        return n1 != n2 and n1 not in self.entries[h2].aliases and n2 not in self.entries[h1].aliases

    def and_questions(self) -> list[dict]:
        cands = []
        for k in sorted(self.linked_from):
            lf = self.linked_from[k]
            for (h1, h2), pos in sorted(self._pairs(k).items()):
                if not self._distinct(h1, h2):
                    continue
                one = sorted(i for i in lf[h1] ^ lf[h2] if not self.names(i, h2 if i in lf[h1] else h1))
                if not one:
                    continue
                neg = sorted(self.rng.sample(one, min(AND_MAX_NEGATIVES, len(one))))
                cands.append({"k": k, "hubs": (h1, h2), "ident": (k, h1, h2), "pos": sorted(pos), "neg": neg})
        self.pools["and"] = len(cands)
        self.rng.shuffle(cands)
        cands.sort(key=lambda c: len(c["pos"]) < 2)  # stable: pairs with two or more positives first
        chosen = self._pick(cands)
        for c in chosen:
            h1, h2 = c["hubs"] if self.rng.random() < 0.5 else c["hubs"][::-1]
            c["question"] = word(NOUNS[c["k"]], self.rng.choice(TEMPLATES["and"]), r1=self.name(h1), r2=self.name(h2))
        return chosen

    def _or_negatives(self, k: str, h1: int, h2: int, pos: set[int]) -> list[int]:
        lf = self.linked_from[k]
        near: set[int] = set()
        for p in pos:
            for h3 in self.entries[p].refs:
                if h3 in lf and h3 not in (h1, h2):
                    near |= lf[h3]
        ok = sorted(i for i in near - pos if not self.names(i, h1) and not self.names(i, h2))
        if not ok:
            return []
        return sorted(self.rng.sample(ok, min(len(ok), self.rng.randint(1, OR_MAX_NEGATIVES))))

    def or_questions(self) -> list[dict]:
        cands = []
        for k in sorted(self.linked_from):
            lf = self.linked_from[k]
            pairs = sorted(p for p, both in self._pairs(k).items() if len(both) == 1)  # related, rarely together
            small = sorted(h for h, src in lf.items() if 2 <= len(src) <= OR_MAX_HUB_REFS)
            self.rng.shuffle(small)
            pairs += [tuple(sorted(small[j:j + 2])) for j in range(0, len(small) - 1, 2)
                      if not lf[small[j]] & lf[small[j + 1]]]  # unrelated pairs fill in
            for h1, h2 in pairs:
                a, b = lf[h1], lf[h2]
                pos = a | b
                if (len(a & b) > 1 or not (a - b) or not (b - a) or len(pos) > OR_MAX_POSITIVES
                        or max(len(a), len(b)) > OR_MAX_HUB_REFS
                        or not self._distinct(h1, h2)):
                    continue
                neg = self._or_negatives(k, h1, h2, pos)
                if neg:
                    cands.append({"k": k, "hubs": (h1, h2), "ident": (k, h1, h2), "pos": sorted(pos), "neg": neg})
        self.pools["or"] = len(cands)
        self.rng.shuffle(cands)
        chosen = self._pick(cands)
        for c in chosen:
            h1, h2 = c["hubs"] if self.rng.random() < 0.5 else c["hubs"][::-1]
            c["question"] = word(NOUNS[c["k"]], self.rng.choice(TEMPLATES["or"]), r1=self.name(h1), r2=self.name(h2))
        return chosen


# --------------------------------------------------------------------------- writing


def build(dict_path: Path, index_path: Path, out: Path, seed: int = 0, per_type: int = 300,
          max_passages: int = 8000, overwrite: bool = False) -> dict:
    """Write the set to `out`, whole or not at all: a folder that holds anything else is refused
    unless `overwrite`."""
    return write_whole(out, NAME, overwrite,
                       lambda folder: write_set(dict_path, index_path, folder, seed, per_type, max_passages))


def write_set(dict_path: Path, index_path: Path, out: Path, seed: int, per_type: int, max_passages: int) -> dict:
    entries, by_name, edition = load_entries(dict_path, index_path)
    b = Builder(entries, by_name, seed, per_type)
    made = {"and": b.and_questions(), "or": b.or_questions(), "not": b.not_questions()}
    labelled = sorted({i for qs in made.values() for c in qs for i in c["pos"] + c["neg"]})
    if len(labelled) > max_passages:
        raise FoldocError(f"the questions label {len(labelled)} passages, more than --max-passages "
                          f"{max_passages}; lower --per-type or raise --max-passages")
    used_cats = sorted({c["k"] for qs in made.values() for c in qs})
    fill = sorted({i for k in used_cats for i in b.members[k]} - set(labelled))
    b.rng.shuffle(fill)
    keep = sorted(set(labelled) | set(fill[:max_passages - len(labelled)]))

    with open(out / "corpus.jsonl", "w", encoding="utf-8") as f:
        for i in keep:
            f.write(json.dumps({"docid": entries[i].docid, "doc": entries[i].doc}, ensure_ascii=False) + "\n")
    types = {}
    with open(out / "eval.jsonl", "w", encoding="utf-8") as f:
        for qtype in ("and", "or", "not"):
            qs = made[qtype]
            for n, c in enumerate(qs, 1):
                row = {"qid": f"foldoc-{qtype}-{n:04d}", "question": c["question"], "question_type": qtype,
                       "positive_ctxs": [{"passage_id": entries[i].docid} for i in c["pos"]],
                       "negative_ctxs": [{"passage_id": entries[i].docid} for i in c["neg"]]}
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
            types[qtype] = {
                "count": len(qs),
                "avg_positives": round(sum(len(c["pos"]) for c in qs) / len(qs), 2) if qs else 0.0,
                "avg_negatives": round(sum(len(c["neg"]) for c in qs) / len(qs), 2) if qs else 0.0,
                "with_negatives": sum(1 for c in qs if c["neg"]),
                "categories": dict(sorted(Counter(c["k"] for c in qs).items())),
            }
    stats = {
        "name": NAME,
        "source": {"title": "The Free On-line Dictionary of Computing (FOLDOC)", "edition": edition,
                   "editor": "Denis Howe", "url": "http://foldoc.org/", "debian_package": "dict-foldoc",
                   "licence": "GNU Free Documentation License, version 1.1 or later"},
        "seed": seed,
        "settings": {"per_type": per_type, "max_passages": max_passages, "max_words": MAX_WORDS,
                     "min_words": MIN_WORDS, "max_hub_refs": MAX_HUB_REFS, "not_refs": list(NOT_REFS),
                     "and_max_hub_refs_in_category": AND_MAX_HUB_REFS, "or_max_hub_refs_in_category": OR_MAX_HUB_REFS,
                     "or_max_positives": OR_MAX_POSITIVES},
        "dictionary_entries": len(entries),
        "corpus_docs": len(keep),
        "labelled_docs": len(labelled),
        "categories": {k: NOUNS[k] for k in used_cats},
        "candidate_pools": dict(sorted(b.pools.items())),
        "types": types,
        "total_questions": sum(len(q) for q in made.values()),
    }
    (out / "stats.json").write_text(json.dumps(stats, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / "README.md").write_text(readme(stats), encoding="utf-8")
    return stats


def readme(s: dict) -> str:
    rows = "\n".join(f"| {t.upper():<4}| {v['count']} | {v['avg_positives']:.2f} | {v['avg_negatives']:.2f} |"
                     for t, v in s["types"].items())
    src = s["source"]
    lo, hi = s["settings"]["not_refs"]
    or_max = s["settings"]["or_max_positives"]
    return f"""# FOLDOC-Bool-dev: Boolean questions over a computing dictionary, for choosing settings

A development set of AND / OR / NOT retrieval questions whose passages were written by others:
the entries of {src['title']}, {src['edition'] or 'dictd edition'}
(editor {src['editor']}, {src['url']}; {src['licence']};
read from the Debian package `{src['debian_package']}`). The labels come from FOLDOC's own
category tags and cross-references, not from anyone on this project. Use it to choose settings;
it is not a test set. Never train on it, nor on anything else built from FOLDOC: its figures are
only worth something while it is unseen.

    corpus.jsonl   {s['corpus_docs']:,} passages, {{"docid", "doc"}}: "<headword>: <definition>", markup
                   removed, cut to about {s['settings']['max_words']} words
    eval.jsonl     {s['total_questions']} questions, {{"qid", "question", "question_type": and|or|not,
                   "positive_ctxs": [{{"passage_id"}}], "negative_ctxs": [{{"passage_id"}}]}}
    stats.json     source, seed, settings, counts, average positives and negatives per type

`boolcl evaluate MODEL data=THIS_FOLDER` scores it: MRR@10 and NegRecall@10 per type.

How it was built (scripts/devsets/foldoc.py, seed {s['seed']}): a passage is related to an entry R
when its corpus text links to R ({{R}} in FOLDOC's markup) within a sense tagged with the
question's category K.
- NOT: a hub R linked from {lo}-{hi} entries of K; one of them, B, is excluded.
  Positives: the other entries of K linking to R; negative: B.
- AND: entries of K linking to both R1 and R2; negatives: entries of K linking to exactly one
  of them and neither linking to nor naming the other (up to 4).
- OR: entries of K linking to R1 or R2 (at most one links to both, at most {or_max} positives);
  negatives: 1-3 entries of K that neither link to nor name R1 or R2 but share another hub with
  a positive.
- A hub is a tagged entry with a proper name or a name of several words, linked from at most
  {s['settings']['max_hub_refs']} entries, and not itself in K. Names that are the headword of more than one entry are
  not used, nor are links to such names.

| type | questions | avg positives | avg negatives |
|------|-----------|---------------|---------------|
{rows}

Caveats: FOLDOC does not link every mention, so some right answers are unlabelled (they
name R without linking to it); a category tag is a subject more than a kind (an "operating
systems term" may be an operating system or a concept of one).

Do not commit these files into the project.
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("results/devsets/foldoc"),
                    help="output folder (default results/devsets/foldoc)")
    ap.add_argument("--dict", type=Path, default=DEFAULT_DICT, help=f"FOLDOC .dict.dz (default {DEFAULT_DICT})")
    ap.add_argument("--index", type=Path, default=DEFAULT_INDEX, help=f"FOLDOC .index (default {DEFAULT_INDEX})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-type", type=int, default=300, help="questions per type, at most (default 300)")
    ap.add_argument("--max-passages", type=int, default=8000, help="corpus size, at most (default 8000)")
    ap.add_argument("--overwrite", action="store_true", help="write into an --out that holds other files")
    args = ap.parse_args(argv)
    if args.per_type < 1 or args.max_passages < 1:
        ap.error("--per-type and --max-passages must be positive")
    t0 = time.time()
    try:
        stats = build(args.dict, args.index, args.out, args.seed, args.per_type, args.max_passages,
                      overwrite=args.overwrite)
    except (FoldocError, ConfigError) as e:  # ConfigError: --out is a file
        print(f"error: {e}", file=sys.stderr)
        return 2
    counts = ", ".join(f"{t.upper()} {v['count']}" for t, v in stats["types"].items())
    print(f"wrote {args.out}: {counts}; {stats['corpus_docs']} passages ({time.time() - t0:.1f} s)")
    for t, v in stats["types"].items():
        if v["count"] < args.per_type:
            print(f"note: {v['count']} {t.upper()} questions, fewer than --per-type {args.per_type} "
                  f"(the data allows no more)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
