"""The GCIDE exclusion development-set builder (scripts/devsets/gcide_exclusion.py), on a small
dictd pair written here in GCIDE's markup."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import load_script
from test_devset_foldoc import b64, read_jsonl, write_dictd

REAL_INDEX = Path("/usr/share/dictd/gcide.index")
REAL_DICT = Path("/usr/share/dictd/gcide.dict.dz")
W = "   [1913 Webster]\n"

ENTRIES = [
    (["00-database-short"], "00-database-short\n     The Collaborative International Dictionary of English\n"),
    # etymology over two lines, a numbered Zool. sense, a Far. sense (another subject), a quotation,
    # a note and a list of sub-entries
    (["Thrush"], "Thrush \\Thrush\\, n. [OE. [thorn]rusche, AS. [thorn]rysce; akin\n"
                 "   to OHG. drosca. Cf. {Throstle}.]\n"
                 "   1. (Zool.) Any one of numerous species of singing birds\n"
                 "      belonging to the genus Turdus and allied genera, noted for the sweetness of their songs.\n" + W +
                 "\n   Note: The song thrush and the missel thrush are the best known of the European kinds.\n" + W +
                 "\n            The throstle with his note so true.     --Shak.\n" + W +
                 "\n   2. (Far.) An inflammatory affection of the feet in certain animals, found in the frog.\n" + W +
                 "\n   {Water thrush}, an American warbler.\n"),
    (["Blackbird"], "Blackbird \\Black\"bird\\ (bl[a^]k\"b[~e]rd), n. (Zool.)\n"
                    "   In England, a species of {thrush} ({Turdus merula}), a singing\n"
                    "   bird with a fine note; the merle. In America the name is given to several other birds.\n" + W),
    (["Cowbird"], "Cowbird \\Cow\"bird`\\, n. (Zool.)\n"
                  "   An American bird, allied to the blackbird, which lays its eggs in the nests of\n"
                  "   other birds and leaves its young to be reared by them.\n" + W),
    (["Oboe"], "Oboe \\O\"boe\\, n. [It., fr. F. hautbois.] (Mus.)\n"
               "   One of the higher wind instruments in the modern orchestra, somewhat like the clarinet\n"
               "   in form, but more slender, and sounded by a double reed.\n" + W),
    (["Clarinet"], "Clarinet \\Clar\"i*net\\, n. [F. clarinette.] (Mus.)\n"
                   "   A wind instrument, made of wood, having a single reed, and a tone of a smooth and\n"
                   "   mellow quality, used in bands and orchestras of every size.\n" + W),
    # an entry GCIDE took from WordNet: never a passage, even though others name it
    (["Zebu"], "Zebu \\Ze\"bu\\, n. (Zool.)\n"
               "   A humped bovine of India and Africa kept as a draught animal, sturdy and patient,\n"
               "   and often seen by travellers near the orchestra grounds of the towns.\n"
               "   [WordNet 1.5]\n"),
    (["Gaur"], "Gaur \\Gaur\\, n. (Zool.)\n"
               "   A very large East Indian wild ox, larger than the zebu, with a high ridge along\n"
               "   the back and short, thick, curved horns.\n" + W),
    # another subject only: not a passage
    (["Tort"], "Tort \\Tort\\, n. (Law)\n"
               "   Any civil wrong or injury other than a breach of contract, for which the law gives\n"
               "   damages to the one wronged by it, as by a blackbird.\n" + W),
    (["Merle"], "Merle \\Merle\\, n. (Zool.)\n   The blackbird.\n" + W),  # too short to be a passage
    (["Chimaera"], "Chim[ae]ra \\Chi*m[ae]\"ra\\, n. (Zool.)\n"
                   "   A genus of cartilaginous fishes, including the so-called sea cat of the northern\n"
                   "   seas, which is named for its long tail, as a cowbird is named for the cattle it follows.\n" + W),
]


@pytest.fixture(scope="module")
def gcide():
    return load_script("scripts/devsets/gcide_exclusion")


@pytest.fixture
def built(gcide, tmp_path):
    dict_path, index_path = write_dictd(tmp_path, ENTRIES)
    out = tmp_path / "out"
    assert gcide.main(["--out", str(out), "--dict", str(dict_path), "--index", str(index_path), "--seed", "3"]) == 0
    return out


def heads_of(folder: Path) -> dict[str, str]:
    return {r["docid"]: r["doc"].split(": ", 1)[0] for r in read_jsonl(folder / "corpus.jsonl")}


def test_passages_keep_the_chosen_subjects_cleanly(gcide, tmp_path):
    dict_path, index_path = write_dictd(tmp_path, ENTRIES)
    entries, by_name, undecodable, edition = gcide.load_entries(dict_path, index_path)
    assert (undecodable, edition) == (0, "The Collaborative International Dictionary of English")
    docs = {e.headword: e.doc for e in entries}
    assert set(docs) == {"Thrush", "Blackbird", "Cowbird", "Oboe", "Clarinet", "Gaur", "Chimaera"}
    assert docs["Thrush"] == ("Thrush: Any one of numerous species of singing birds belonging to the genus Turdus "
                              "and allied genera, noted for the sweetness of their songs. The song thrush and the "
                              "missel thrush are the best known of the European kinds.")
    assert docs["Blackbird"].startswith("Blackbird: In England, a species of thrush (Turdus merula), a singing bird")
    assert "Chimaera: A genus of cartilaginous fishes" in docs["Chimaera"]
    for doc in docs.values():
        assert not re.search(r"[\[\]{}\\]|Webster|Shak|\(Zool\.\)|\(Mus\.\)", doc), doc
    assert by_name["blackbird"] == [next(e.key for e in entries if e.headword == "Blackbird")]


def test_pairs_follow_what_a_passage_names(built):
    heads = heads_of(built)
    docs = {r["docid"]: r["doc"] for r in read_jsonl(built / "corpus.jsonl")}
    questions = read_jsonl(built / "eval.jsonl")
    assert questions
    pool = []
    for q in questions:
        assert set(q) == {"qid", "question", "question_type", "positive_ctxs", "negative_ctxs"}
        assert q["question_type"] == "not"
        (a,), (b,) = [c["passage_id"] for c in q["positive_ctxs"]], [c["passage_id"] for c in q["negative_ctxs"]]
        pool += [a, b]
        kind = q["qid"].split("-")[1]
        naming, named = (a, b) if kind == "names" else (b, a)
        assert kind in ("names", "named"), q
        assert heads[named].lower() in docs[naming].lower().split(": ", 1)[1], q
        assert heads[a].lower() in q["question"].lower() and heads[b].lower() in q["question"].lower(), q
    assert sorted(pool) == sorted(heads), "the pool is the answer and the excluded passage of every question, once"
    stats = json.loads((built / "stats.json").read_text())
    assert stats["seed"] == 3 and stats["corpus_docs"] == len(heads)
    assert sum(stats["kinds"].values()) == len(questions) == stats["total_questions"]
    assert "never train on it" in (built / "README.md").read_text().lower()


def test_same_seed_same_bytes_and_other_folders_kept(gcide, tmp_path, capsys):
    dict_path, index_path = write_dictd(tmp_path, ENTRIES)
    args = ["--dict", str(dict_path), "--index", str(index_path)]
    outs = []
    for name in ("a", "b"):
        assert gcide.main(["--out", str(tmp_path / name), *args]) == 0
        outs.append(tmp_path / name)
    for f in ("corpus.jsonl", "eval.jsonl", "stats.json", "README.md"):
        assert (outs[0] / f).read_bytes() == (outs[1] / f).read_bytes(), f
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me", encoding="utf-8")
    assert gcide.main(["--out", str(mine), *args]) == 2
    assert str(mine) in capsys.readouterr().err
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


def test_bad_files_are_named(gcide, tmp_path, capsys):
    dict_path, index_path = write_dictd(tmp_path, ENTRIES, extra_index_lines=["broken line"])
    bad = len(index_path.read_text().splitlines())
    with pytest.raises(gcide.GcideError, match=rf"{index_path.name}:{bad}: expected 'headword"):
        gcide.load_entries(dict_path, index_path)
    index_path.write_text(f"Thrush\t{b64(10 ** 7)}\tBC\n", encoding="utf-8")
    with pytest.raises(gcide.GcideError, match=rf"{index_path.name}:1: entry 'Thrush' .* lies outside"):
        gcide.load_entries(dict_path, index_path)
    assert gcide.main(["--out", str(tmp_path / "o"), "--dict", str(dict_path),
                       "--index", str(tmp_path / "nope.index")]) == 2
    err = capsys.readouterr().err
    assert "nope.index: file not found" in err and "apt-get install dict-gcide" in err
    assert not (tmp_path / "o").exists()


def test_boolcl_reads_the_folder(built):
    from boolcl.data.loaders import load_folder

    rs = load_folder(built)  # checks every labelled passage is in the corpus
    assert len(rs.questions) == len(read_jsonl(built / "eval.jsonl"))
    assert {q.question_type for q in rs.questions} == {"not"}


@pytest.mark.skipif(not (REAL_INDEX.is_file() and REAL_DICT.is_file()),
                    reason="GCIDE is not installed (apt-get install dict-gcide)")
def test_real_gcide_builds(gcide, tmp_path):
    stats = gcide.build(REAL_DICT, REAL_INDEX, tmp_path)
    assert stats["kinds"] == {"names": 500, "named": 500}
    assert stats["corpus_docs"] == 2000
