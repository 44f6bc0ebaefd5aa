"""The FOLDOC development-set builder (scripts/devsets/foldoc.py), on a small dictd pair written here."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from conftest import load_script

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
REAL_INDEX = Path("/usr/share/dictd/foldoc.index")
REAL_DICT = Path("/usr/share/dictd/foldoc.dict.dz")


def b64(n: int) -> str:
    """dictd's base64 numbers, written independently of the builder's reader."""
    digits = ""
    while True:
        digits = B64[n % 64] + digits
        n //= 64
        if n == 0:
            return digits


FILLER = " ".join(f"filler{i}" for i in range(150))

# (index headwords, entry text). Hubs are tagged, not languages; the languages link to them.
ENTRIES = [
    (["00-database-short"], "00-database-short\n     The Free On-line Dictionary of Computing (1 May 2024)\n"),
    (["unix"], "Unix\n\n   <operating system> A multi-user time-sharing operating system from the\n"
               "   laboratories, widely ported.\n\n   (2001-05-14)\n"),
    (["vms"], "VMS\n\n   <operating system> A proprietary operating system for a line of\n"
              "   minicomputers sold by a large vendor.\n\n   (1999-01-01)\n"),
    (["emacs"], "Emacs\n\n   <tool> An extensible text editor with a programmable core, popular\n"
                "   with hackers for decades.\n\n   (1998-02-02)\n"),
    (["windows"], "Windows\n\n   <operating system> A family of graphical operating systems for\n"
                  "   personal computers sold since the eighties.\n\n   (2003-03-03)\n"),
    (["foo", "foo language"], "Foo\nfoo language\n\n   <language> A small scripting notation first written for\n"
                              "   {Unix} and scripted from within {Emacs} by its two authors.\n\n"
                              "   See also {Bazic}.\n\n   {Foo home (http://example.org/foo)}.\n\n   (1996-06-01)\n"),
    (["barlang"], "Barlang\n\n   <language> A systems notation that ran on both {Unix} and {VMS}\n"
                  "   machines in the early days of networking.\n\n   (1997-07-07)\n"),
    (["bazic"], "Bazic\n\n   <language> An interactive beginner notation for {Unix} with an\n"
                "   editing mode for {Emacs} and a small library.\n\n   (1995-05-05)\n"),
    (["quxel"], "Quxel\n\n   <language> A pattern matching notation distributed with {Unix}\n"
                "   releases and used for text reports.\n\n   (1994-04-04)\n"),
    (["quuxon"], "Quuxon\n\n   <language> A business notation ported from {VMS} minicomputers to\n"
                 "   {Windows} desktops in the nineties.\n\n   (1993-03-03)\n"),
    (["corgi"], "Corgi\n\n   <language> A visual notation for {Windows} with a plugin that runs\n"
                "   inside {Emacs} buffers for editing.\n\n   (1992-02-02)\n"),
    (["graultic"], "Graultic\n\n   <language> A numeric notation written for {VMS} clusters at a\n"
                   "   physics laboratory in Europe.\n\n   (1991-01-01)\n"),
    (["garply"], "Garply\n\n   <language> A games notation for {Windows} home computers with\n"
                 "   sprites, sound and simple joystick input.\n\n   (1990-10-10)\n"),
    (["waldo"], "Waldo\n\n   <language> An experimental dataflow notation from a university\n"
                "   research group, never widely used.\n\n   (1989-09-09)\n"),
    (["longlang"], f"Longlang\n\n   <language> A verbose notation. {FILLER} It later ran on {{Unix}}.\n\n"
                   "   (1988-08-08)\n"),
    (["tiny"], "Tiny\n\n   <language> See {Foo}.\n"),
]


def write_dictd(folder: Path, entries=ENTRIES, extra_index_lines=()) -> tuple[Path, Path]:
    data, index = b"\n\n", []
    for heads, text in entries:
        raw = text.encode("utf-8")
        for h in heads:
            index.append(f"{h}\t{b64(len(data))}\t{b64(len(raw))}")
        data += raw
    dict_path, index_path = folder / "mini.dict.dz", folder / "mini.index"
    with gzip.open(dict_path, "wb") as f:
        f.write(data)
    index_path.write_text("\n".join(sorted(index) + list(extra_index_lines)) + "\n", encoding="utf-8")
    return dict_path, index_path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def foldoc():
    return load_script("scripts/devsets/foldoc")


@pytest.fixture
def built(foldoc, tmp_path):
    dict_path, index_path = write_dictd(tmp_path)
    out = tmp_path / "out"
    assert foldoc.main(["--out", str(out), "--dict", str(dict_path), "--index", str(index_path), "--seed", "3"]) == 0
    return out


def test_layout_and_labels(built):
    assert sorted(p.name for p in built.iterdir()) == ["README.md", "corpus.jsonl", "eval.jsonl", "stats.json"]
    corpus = read_jsonl(built / "corpus.jsonl")
    assert all(set(r) == {"docid", "doc"} for r in corpus)
    heads = {r["docid"]: r["doc"].split(": ", 1)[0] for r in corpus}
    assert len(heads) == len(corpus), "docids repeat"
    assert "Tiny" not in heads.values(), "a one-line pointer entry is not a passage"
    assert not any(h.startswith("00-database") for h in heads.values())
    questions = read_jsonl(built / "eval.jsonl")
    assert {q["question_type"] for q in questions} == {"and", "or", "not"}
    for q in questions:
        assert set(q) == {"qid", "question", "question_type", "positive_ctxs", "negative_ctxs"}
        pos = [c["passage_id"] for c in q["positive_ctxs"]]
        neg = [c["passage_id"] for c in q["negative_ctxs"]]
        assert pos and neg, q
        assert set(pos) <= heads.keys() and set(neg) <= heads.keys(), q
        assert not set(pos) & set(neg), q
        # Longlang links to Unix only after the 120-word cut: its passage does not show the link
        assert "Longlang" not in {heads[p] for p in pos}, q
        # a question names hubs and categories only, never a positive
        assert not any(heads[p] in q["question"] for p in pos), q
    stats = json.loads((built / "stats.json").read_text())
    assert stats["seed"] == 3 and stats["corpus_docs"] == len(corpus)
    assert stats["source"]["edition"] == "1 May 2024" and "Free Documentation License" in stats["source"]["licence"]
    for qtype in ("and", "or", "not"):
        of_type = [q for q in questions if q["question_type"] == qtype]
        assert stats["types"][qtype]["count"] == len(of_type)
        avg = sum(len(q["positive_ctxs"]) for q in of_type) / len(of_type)
        assert stats["types"][qtype]["avg_positives"] == round(avg, 2)
    assert "never train on it" in (built / "README.md").read_text().lower()


def test_labels_follow_cross_references(built):
    heads = {r["docid"]: r["doc"].split(": ", 1)[0] for r in read_jsonl(built / "corpus.jsonl")}
    named = lambda q, key: sorted(heads[c["passage_id"]] for c in q[key])  # noqa: E731
    questions = read_jsonl(built / "eval.jsonl")
    ands = [q for q in questions if q["question_type"] == "and" and "Unix" in q["question"]
            and "Emacs" in q["question"]]
    assert ands and named(ands[0], "positive_ctxs") == ["Bazic", "Foo"]
    assert set(named(ands[0], "negative_ctxs")) <= {"Barlang", "Quxel", "Corgi"}
    for q in questions:
        assert q["question"].startswith(("Which", "Name", "Find", "A ", "An ")) and "programming language" in q[
            "question"], q


def test_corpus_text_is_clean(built):
    docs = {r["doc"].split(": ", 1)[0]: r["doc"] for r in read_jsonl(built / "corpus.jsonl")}
    foo = docs["Foo"]
    assert foo == "Foo: A small scripting notation first written for Unix and scripted from within Emacs by its " \
                  "two authors."
    for doc in docs.values():
        assert "{" not in doc and "}" not in doc and "<language>" not in doc and "http" not in doc, doc
        assert not re.search(r"\(\d{4}-\d{2}-\d{2}\)", doc), doc
    assert len(docs["Longlang"].split()) <= 122


def test_not_names_its_excluded_entry(built):
    heads = {r["docid"]: r["doc"].split(": ", 1)[0] for r in read_jsonl(built / "corpus.jsonl")}
    nots = [q for q in read_jsonl(built / "eval.jsonl") if q["question_type"] == "not"]
    assert nots
    for q in nots:
        assert len(q["negative_ctxs"]) == 1
        assert heads[q["negative_ctxs"][0]["passage_id"]] in q["question"], q
        assert len(q["positive_ctxs"]) >= 2


def test_same_seed_same_bytes(foldoc, tmp_path):
    dict_path, index_path = write_dictd(tmp_path)
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        assert foldoc.main(["--out", str(out), "--dict", str(dict_path), "--index", str(index_path)]) == 0
        outs.append(out)
    for f in ("corpus.jsonl", "eval.jsonl", "stats.json", "README.md"):
        assert (outs[0] / f).read_bytes() == (outs[1] / f).read_bytes(), f


def test_a_folder_holding_other_files_is_refused_and_kept(foldoc, tmp_path, capsys):
    dict_path, index_path = write_dictd(tmp_path)
    args = ["--dict", str(dict_path), "--index", str(index_path)]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me", encoding="utf-8")
    assert foldoc.main(["--out", str(mine), *args]) == 2
    err = capsys.readouterr().err
    assert str(mine) in err and "--overwrite" in err
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    assert (mine / "notes.txt").read_text(encoding="utf-8") == "keep me"
    assert foldoc.main(["--out", str(mine), *args, "--overwrite"]) == 0
    assert (mine / "notes.txt").is_file() and (mine / "eval.jsonl").is_file()

    again = tmp_path / "again"  # its own earlier output is rebuilt in place, same bytes
    assert foldoc.main(["--out", str(again), *args]) == 0
    first = (again / "eval.jsonl").read_bytes()
    assert foldoc.main(["--out", str(again), *args]) == 0
    assert (again / "eval.jsonl").read_bytes() == first
    assert not list(tmp_path.glob("*.partial"))


def test_malformed_index_line_names_file_and_line(foldoc, tmp_path, capsys):
    dict_path, index_path = write_dictd(tmp_path, extra_index_lines=["broken line without tabs"])
    bad_line = len(index_path.read_text().splitlines())
    with pytest.raises(foldoc.FoldocError, match=rf"{index_path.name}:{bad_line}: expected 'headword"):
        foldoc.load_entries(dict_path, index_path)
    assert foldoc.main(["--out", str(tmp_path / "o"), "--dict", str(dict_path), "--index", str(index_path)]) == 2
    assert f"{index_path}:{bad_line}:" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()

    index_path.write_text("unix\tA!\tBC\n", encoding="utf-8")
    with pytest.raises(foldoc.FoldocError, match=rf"{index_path.name}:1: 'A!' is not a dictd base64"):
        foldoc.load_entries(dict_path, index_path)
    index_path.write_text(f"unix\t{b64(10 ** 7)}\tBC\n", encoding="utf-8")
    with pytest.raises(foldoc.FoldocError, match=rf"{index_path.name}:1: entry 'unix' .* lies outside"):
        foldoc.load_entries(dict_path, index_path)


def test_missing_file_says_how_to_install(foldoc, tmp_path, capsys):
    dict_path, _ = write_dictd(tmp_path)
    assert foldoc.main(["--out", str(tmp_path / "o"), "--dict", str(dict_path),
                        "--index", str(tmp_path / "nope.index")]) == 2
    err = capsys.readouterr().err
    assert "nope.index: file not found" in err and "apt-get install dict-foldoc" in err


def test_boolcl_reads_the_folder(built):
    """`boolcl evaluate MODEL data=FOLDER` goes through load_retrieval_set."""
    from boolcl.data.loaders import load_retrieval_set

    rs = load_retrieval_set(str(built))
    assert rs.name == built.name
    assert len(rs.questions) == len(read_jsonl(built / "eval.jsonl"))
    assert len(rs.corpus) == len(read_jsonl(built / "corpus.jsonl"))
    assert {q.question_type for q in rs.questions} == {"and", "or", "not"}


@pytest.mark.skipif(not (REAL_INDEX.is_file() and REAL_DICT.is_file()),
                    reason="FOLDOC is not installed (apt-get install dict-foldoc)")
def test_real_foldoc_builds(foldoc, tmp_path):
    stats = foldoc.build(REAL_DICT, REAL_INDEX, tmp_path)
    for qtype in ("and", "or", "not"):
        assert stats["types"][qtype]["count"] >= 100, (qtype, stats["types"][qtype])
    assert stats["corpus_docs"] <= 8000
    from boolcl.data.loaders import load_folder

    rs = load_folder(tmp_path)  # checks every labelled passage is in the corpus
    assert len(rs.questions) == stats["total_questions"]
