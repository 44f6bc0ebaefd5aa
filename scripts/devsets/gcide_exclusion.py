"""Build GCIDE-Excl-dev: exclusion questions ("A, but not B") over natural-history and science entries
of Webster's 1913 dictionary, as carried by GCIDE.

    python scripts/devsets/gcide_exclusion.py --out results/devsets/gcide-excl
    python scripts/devsets/gcide_exclusion.py --out DIR --dict gcide.dict.dz --index gcide.index --seed 0

Reads the dictd files of the GNU Collaborative International Dictionary of English (Debian package
`dict-gcide`, GPL) and writes a development set in the project's folder layout (corpus.jsonl,
eval.jsonl, stats.json, README.md), which `boolcl evaluate MODEL data=DIR` reads. It is for
choosing settings: never train on it.

Each question asks for one entry A and excludes one other entry B, and the pool is the A and B
passages of all questions, so it measures two things at once: how high the answer ranks among
passages on other subjects (MRR@10), and whether the excluded passage stays out of the top ten.
A pair is two entries one of which names the other, by a cross-reference ({B} in GCIDE's
markup) or by the other's headword in its text; the named entry's headword must be specific
(named by at most MAX_NAMED_BY entries) and share no word with the other's:

- `names`: A's passage names B ("a species of thrush", "see Redwing"), so the answer
  itself names what the question excludes, as in many exclusion questions over linked
  encyclopedia articles;
- `named`: B's passage names A, so the excluded passage names what the question asks for.

Senses GCIDE took from WordNet are dropped, so no passage shares a source with WN-Bool-dev; the
rest is Webster's 1913 text, its supplement and GCIDE's own additions. Questions are written from
a few templates, with A's and B's headwords.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dictd import DictdError, check_span, read_dict, read_index, write_whole  # noqa: E402

from boolcl.errors import ConfigError  # noqa: E402

NAME = "GCIDE-Excl-dev"
DEFAULT_DICT = Path("/usr/share/dictd/gcide.dict.dz")
DEFAULT_INDEX = Path("/usr/share/dictd/gcide.index")
INSTALL_HINT = "install GCIDE with `apt-get install dict-gcide`, or give --dict and --index"

MAX_WORDS = 120
MIN_WORDS = 12
PER_KIND = 500
KINDS = ("names", "named")
# Subject labels whose senses describe things (species, minerals, organs, ships' parts), the closest
# a dictionary comes to encyclopedia articles.
DOMAINS = ("Zool.", "Bot.", "Min.", "Anat.", "Chem.", "Med.", "Astron.", "Geol.", "Naut.", "Arch.",
           "Mus.", "Mil.", "Paleon.", "Ethnol.", "Physiol.")
MAX_NAME_WORDS = 3
MAX_NAMED_BY = 10  # a name more passages use than this is too general to exclude

TEMPLATES = [
    "Tell me about {a}, but not about {b}.",
    "What is {a}? I am not asking about {b}.",
    "Information on {a}, leaving {b} aside",
    "Describe {a} without going into {b}.",
    "Facts about {a} that are not about {b}",
    "I want to read about {a}, not {b}.",
]

ESCAPE_WORDS = {"ae": "ae", "AE": "Ae", "oe": "oe", "OE": "Oe", "thorn": "th", "eth": "th", "aum": "a",
                "imac": "i", "asl": "a", "=oo": "oo", "oo^": "oo", "ng": "ng", "=ae": "ae", "udd": "u",
                "yogh": "y", "add": "a", "sect": "", "deg": "", "root": "", "th": "th"}
ACCENT_RE = re.compile(r"\[(?:[\"'=`~.\-^*,]+([A-Za-z])|([A-Za-z])[\^~\"]+)\]")
WORD_ESCAPE_RE = re.compile(r"\[(" + "|".join(re.escape(k) for k in sorted(ESCAPE_WORDS, key=len, reverse=True)) + r")\]")
BRACKET_RE = re.compile(r"\[[^\[\]]*\]")
ANY_DOMAIN_RE = re.compile(r"\(([A-Z][a-z]{1,12}\.(?: [A-Z][a-z]+\.)?)\)")
REF_RE = re.compile(r"\{([^{}]*)\}")
SENSE_RE = re.compile(r"^(\d+\.|\([a-z]\))\s*")
HEAD_RE = re.compile(r"^([^\\\n]+?)\s*\\")
# "Goshawk \\Gos"hawk`\\ (pronunciation), n.; pl. {Goshawks}." once brackets are gone
HEADING_RE = re.compile(r"^[^\\]*\\[^\\]*\\\s*(\([^()]*\))?\s*,?\s*((?:[a-z]{1,5}\.\s*)+(?:;\s*pl\.\s*[^.]*\.\s*)?)?")
QUOTE_RE = re.compile(r"--\s*[A-Z][A-Za-z.]*")
NAME_OK_RE = re.compile(r"^[A-Za-z][A-Za-z \-']*$")


GcideError = DictdError  # a problem with the input files; the message names the file (and line)


@dataclass
class Entry:
    key: int
    headword: str
    text: str  # cleaned senses of the chosen subjects, cut to about MAX_WORDS words
    refs: list[str]  # cross-reference targets within `text`, lower case

    @property
    def doc(self) -> str:
        return f"{self.headword}: {self.text}"

    @property
    def docid(self) -> str:
        return f"gcide-{self.key}"


# --------------------------------------------------------------------------- reading


def unescape(s: str) -> str:
    """GCIDE writes accented letters and ligatures as [=a], [ae], [thorn]: keep the letters."""
    s = WORD_ESCAPE_RE.sub(lambda m: ESCAPE_WORDS[m.group(1)], s)
    return ACCENT_RE.sub(lambda m: m.group(1) or m.group(2), s)


def strip_brackets(s: str) -> str:
    """Drop etymologies, source tags and usage labels: every [...] block, innermost first."""
    while True:
        t = BRACKET_RE.sub(" ", s)
        if t == s:
            return t
        s = t


def words(s: str) -> list[str]:
    return s.split()


def cut(text: str, max_words: int = MAX_WORDS) -> str:
    w = words(text)
    if len(w) <= max_words:
        return text
    head = " ".join(w[:max_words])
    stop = head.rfind(". ")
    return head[:stop + 1] if stop > len(head) // 2 else head + " ..."


def parse_entry(raw: str) -> tuple[str, str, list[str]] | None:
    """(headword, text, refs) of one entry, or None when no sense of the chosen subjects is left.

    A sense counts when it carries one of DOMAINS, or the entry's heading does and the sense
    carries no other subject label. Quotations, sub-entry lists ({Wood thrush}, ...), synonym
    lists and senses GCIDE took from WordNet are dropped; notes after a kept sense are kept.
    """
    m = HEAD_RE.match(raw)
    if not m:
        return None
    headword = unescape(m.group(1).strip())
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", raw)]
    # The heading (headword, pronunciation, part of speech, etymology) may run over several lines
    # and share its paragraph with the first sense.
    first = strip_brackets(unescape(paragraphs[0])) if "WordNet" not in paragraphs[0] else ""
    first = HEADING_RE.sub("", " ".join(first.split()), count=1)
    entry_domain = None
    dom = ANY_DOMAIN_RE.match(first)
    if dom:
        entry_domain = dom.group(1)
        if SENSE_RE.match(first[dom.end():].strip()):  # a label over numbered senses
            first = first[dom.end():].strip()
    if entry_domain is not None and entry_domain not in DOMAINS:
        return None  # the whole entry is on another subject
    kept: list[str] = []
    keeping = False
    for n, flat in enumerate([first] + paragraphs[1:]):
        if not flat:
            continue
        if "WordNet" in flat:
            keeping = False
            continue
        if n and (flat.startswith("{") or flat.startswith("Syn.")) or QUOTE_RE.search(flat):
            continue
        if flat.startswith("Note:"):
            if keeping:
                kept.append(flat[len("Note:"):].strip())
            continue
        flat = SENSE_RE.sub("", flat)
        dom = ANY_DOMAIN_RE.match(flat) or ANY_DOMAIN_RE.search(flat[:40])
        if dom:
            keeping = dom.group(1) in DOMAINS
        else:
            keeping = entry_domain is not None
        if keeping:
            kept.append(flat)
    if not kept:
        return None
    text = " ".join(strip_brackets(unescape(" ".join(kept))).split())
    text = ANY_DOMAIN_RE.sub("", text)
    text = re.sub(r"\s+([,.;:])", r"\1", " ".join(text.split()))
    text = re.sub(r"^[,.;:\s]+", "", text)
    cut_text = cut(text)
    refs = [" ".join(r.lower().split()) for r in REF_RE.findall(cut_text)]
    cut_text = REF_RE.sub(lambda r: r.group(1), cut_text)
    if len(words(cut_text)) < MIN_WORDS:
        return None
    return headword, cut_text, refs


def load_entries(dict_path: Path, index_path: Path) -> tuple[list[Entry], dict[str, list[int]], int, str]:
    """The kept entries, the headword map, how many entries were not UTF-8, and the edition line."""
    rows = read_index(index_path, INSTALL_HINT)
    data = read_dict(dict_path, INSTALL_HINT)
    entries: list[Entry] = []
    by_name: dict[str, list[int]] = defaultdict(list)
    seen: set[tuple[int, int]] = set()
    undecodable = 0
    edition = ""
    for head, off, length, lineno in rows:
        check_span(head, off, length, lineno, data, index_path, dict_path)
        if head == "00-database-short":
            edition = " ".join(data[off:off + length].decode("utf-8", "replace").split("\n", 1)[-1].split())
        if head.startswith("00-database") or (off, length) in seen:
            continue
        seen.add((off, length))
        try:
            raw = data[off:off + length].decode("utf-8")
        except UnicodeDecodeError:
            undecodable += 1
            continue
        parsed = parse_entry(raw)
        if parsed is None:
            continue
        headword, text, refs = parsed
        if " ".join(headword.lower().split()) != " ".join(head.lower().split()):
            continue  # the index line points into another entry (a sub-entry)
        entries.append(Entry(len(entries), headword, text, refs))
        by_name[" ".join(headword.lower().split())].append(entries[-1].key)
    return entries, by_name, undecodable, edition


# --------------------------------------------------------------------------- questions


def good_name(name: str) -> bool:
    return bool(NAME_OK_RE.match(name)) and len(name.split()) <= MAX_NAME_WORDS and len(name) >= 3


def related_names(a: str, b: str) -> bool:
    """Names that share a word, or one inside the other ("thrush", "song thrush"): a question
    that excludes one of them while asking for the other is not well posed."""
    wa, wb = set(a.lower().replace("-", " ").split()), set(b.lower().replace("-", " ").split())
    return bool(wa & wb) or a.lower() in b.lower() or b.lower() in a.lower()


def display(name: str) -> str:
    """Headwords are capitalised in the dictionary; a question uses the common noun."""
    return name if sum(c.isupper() for c in name) > 1 else name[:1].lower() + name[1:]


def mentions(entries: list[Entry], by_name: dict[str, list[int]]) -> dict[int, set[int]]:
    """entry -> the other entries its text names: by a cross-reference, or by the other's headword
    (or its plural) as words of the text."""
    names = {n: ks[0] for n, ks in by_name.items() if len(ks) == 1 and good_name(entries[ks[0]].headword)}
    out: dict[int, set[int]] = defaultdict(set)
    for e in entries:
        toks = re.findall(r"[a-z][a-z\-']*", e.text.lower())
        grams = set(e.refs)
        for n in range(1, MAX_NAME_WORDS + 1):
            for i in range(len(toks) - n + 1):
                g = " ".join(toks[i:i + n])
                grams.add(g)
                if g.endswith("s"):
                    grams.add(g[:-1])
                if g.endswith("es"):
                    grams.add(g[:-2])
        for g in grams:
            k = names.get(g)
            if k is not None and k != e.key:
                out[e.key].add(k)
    return out


def candidate_pairs(entries: list[Entry], by_name: dict[str, list[int]]) -> list[tuple[int, int]]:
    """(naming, named) entry pairs: the first entry's text names the second, whose name is
    specific (named by at most MAX_NAMED_BY entries) and shares no word with the first's."""
    named = mentions(entries, by_name)
    named_by = Counter(k for ks in named.values() for k in ks)
    pairs = set()
    for a, ks in named.items():
        if not good_name(entries[a].headword):
            continue
        for b in ks:
            if named_by[b] <= MAX_NAMED_BY and not related_names(entries[a].headword, entries[b].headword):
                pairs.add((a, b))
    return sorted(pairs)


def choose(pairs: list[tuple[int, int]], entries: list[Entry], per_kind: int, rng: random.Random) -> dict:
    """Per kind, up to `per_kind` questions (answer, excluded) with no passage in two questions,
    so the pool holds two passages per question."""
    order = list(pairs)
    rng.shuffle(order)
    used: set[int] = set()
    made: dict[str, list[dict]] = {k: [] for k in KINDS}
    for n, (citing, cited) in enumerate(order):
        kind = KINDS[n % 2] if all(len(v) < per_kind for v in made.values()) else \
            next((k for k in KINDS if len(made[k]) < per_kind), None)
        if kind is None:
            break
        if citing in used or cited in used:
            continue
        answer, excluded = (citing, cited) if kind == "names" else (cited, citing)
        used.update((answer, excluded))
        q = rng.choice(TEMPLATES).format(a=display(entries[answer].headword), b=display(entries[excluded].headword))
        made[kind].append({"answer": answer, "excluded": excluded, "question": q[:1].upper() + q[1:]})
    return made


# --------------------------------------------------------------------------- writing


def build(dict_path: Path, index_path: Path, out: Path, seed: int = 0, per_kind: int = PER_KIND,
          overwrite: bool = False) -> dict:
    """Write the set to `out`, whole or not at all: a folder that holds anything else is refused
    unless `overwrite`."""
    return write_whole(out, NAME, overwrite, lambda folder: write_set(dict_path, index_path, folder, seed, per_kind))


def write_set(dict_path: Path, index_path: Path, out: Path, seed: int, per_kind: int) -> dict:
    entries, by_name, undecodable, edition = load_entries(dict_path, index_path)
    pairs = candidate_pairs(entries, by_name)
    made = choose(pairs, entries, per_kind, random.Random(seed))
    pool = sorted({i for qs in made.values() for c in qs for i in (c["answer"], c["excluded"])})
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as f:
        for i in pool:
            f.write(json.dumps({"docid": entries[i].docid, "doc": entries[i].doc}, ensure_ascii=False) + "\n")
    with open(out / "eval.jsonl", "w", encoding="utf-8") as f:
        for kind in KINDS:
            for n, c in enumerate(made[kind], 1):
                row = {"qid": f"gcide-{kind}-{n:04d}", "question": c["question"], "question_type": "not",
                       "positive_ctxs": [{"passage_id": entries[c["answer"]].docid}],
                       "negative_ctxs": [{"passage_id": entries[c["excluded"]].docid}]}
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    stats = {
        "name": NAME,
        "source": {"title": "GNU Collaborative International Dictionary of English (GCIDE)",
                   "edition": edition,
                   "text": "Webster's Revised Unabridged Dictionary (1913), its supplement and GCIDE's additions",
                   "debian_package": "dict-gcide", "licence": "GNU General Public License, version 3 or later"},
        "seed": seed,
        "settings": {"per_kind": per_kind, "max_words": MAX_WORDS, "min_words": MIN_WORDS,
                     "domains": list(DOMAINS), "max_named_by": MAX_NAMED_BY, "templates": len(TEMPLATES)},
        "dictionary_entries_kept": len(entries),
        "entries_not_utf8": undecodable,
        "candidate_pairs": len(pairs),
        "corpus_docs": len(pool),
        "kinds": {k: len(v) for k, v in made.items()},
        "total_questions": sum(len(v) for v in made.values()),
    }
    (out / "stats.json").write_text(json.dumps(stats, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / "README.md").write_text(readme(stats), encoding="utf-8")
    return stats


def readme(s: dict) -> str:
    src = s["source"]
    k = s["kinds"]
    return f"""# GCIDE-Excl-dev: exclusion questions over dictionary entries, for choosing settings

A development set of {s['total_questions']:,} questions of the form "A, but not B" whose passages were
written by others: {src['text']}, as carried by {src['edition'] or src['title']}
({src['licence']}; read from the
Debian package `{src['debian_package']}`). Senses GCIDE took from WordNet are left out. Use it to choose
settings; it is not a test set. Never train on it, nor on anything else built from GCIDE or Webster's 1913.

    corpus.jsonl   {s['corpus_docs']:,} passages, {{"docid", "doc"}}: "<headword>: <senses>", markup
                   removed, cut to about {s['settings']['max_words']} words
    eval.jsonl     {s['total_questions']:,} questions, {{"qid", "question", "question_type": "not",
                   "positive_ctxs": [one answer], "negative_ctxs": [one excluded passage]}}
    stats.json     source, seed, settings, counts

`boolcl evaluate MODEL data=THIS_FOLDER` scores it: NOT MRR@10 is how high the answer ranks in the
pool, NOT NegRecall@10 how often the excluded passage is in the top ten.

How it was built (scripts/devsets/gcide_exclusion.py, seed {s['seed']}): the passages are entries whose
senses carry one of the subject labels {', '.join(s['settings']['domains'])}; a pair is two such
entries one of which names the other (a cross-reference, {{B}} in GCIDE's markup, or the other's
headword in its text), the named one named by at most {s['settings']['max_named_by']} entries, their names sharing no word.
Each passage is in one question, so the pool holds the answer and the excluded passage of every question.
- `gcide-names-*` ({k.get('names', 0)}): the answer's passage names the excluded entry.
- `gcide-named-*` ({k.get('named', 0)}): the excluded passage names the answer.
Questions use one of {s['settings']['templates']} templates with the two headwords.

Do not commit these files into the project.
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("results/devsets/gcide-excl"),
                    help="output folder (default results/devsets/gcide-excl)")
    ap.add_argument("--dict", type=Path, default=DEFAULT_DICT, help=f"GCIDE .dict.dz (default {DEFAULT_DICT})")
    ap.add_argument("--index", type=Path, default=DEFAULT_INDEX, help=f"GCIDE .index (default {DEFAULT_INDEX})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-kind", type=int, default=PER_KIND,
                    help=f"questions of each kind, at most (default {PER_KIND})")
    ap.add_argument("--overwrite", action="store_true", help="write into an --out that holds other files")
    args = ap.parse_args(argv)
    if args.per_kind < 1:
        ap.error("--per-kind must be positive")
    t0 = time.time()
    try:
        stats = build(args.dict, args.index, args.out, args.seed, args.per_kind, overwrite=args.overwrite)
    except (GcideError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}: {stats['total_questions']} questions "
          f"({', '.join(f'{k} {v}' for k, v in stats['kinds'].items())}); {stats['corpus_docs']} passages "
          f"({time.time() - t0:.1f} s)")
    for kind, n in stats["kinds"].items():
        if n < args.per_kind:
            print(f"note: {n} '{kind}' questions, fewer than --per-kind {args.per_kind} (the data allows no more)",
                  file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
