"""Scope pooling (train.scope): the pooling arithmetic, save/load, the labels, the head's warm-up, config."""
import json

import pytest
import torch
from conftest import ROOT

from boolcl.config import compose
from boolcl.errors import ConfigError
from boolcl.pooling import (
    EXCLUDED,
    MARKER,
    ORDINARY,
    ScopePooling,
    install,
    scope_pooling,
)
from boolcl.retrieval.models import load_model
from boolcl.train.mixing import Item
from boolcl.train.scope import (
    IGNORE,
    UNKNOWN,
    HiddenMarkerLoss,
    ScopeSentences,
    hidden_markers,
    ordinary_positions,
    practice_sentence,
    row_spans,
    token_labels,
    warm_up,
)

SAMPLE = ROOT / "boolcl" / "data" / "sample"


@pytest.mark.parametrize("mode", ["tokens", "parts"])
def test_fresh_scope_pooling_embeds_like_the_mean_and_round_trips(tiny_model_dir, tmp_path, mode):
    model = load_model(str(tiny_model_dir))
    texts = ["Which string instruments are not plucked?", "A cello is a bowed string instrument."]
    before = model.encode(texts, convert_to_tensor=True)
    head = install(model, drop=1.0, hidden=8, mode=mode)
    after = model.encode(texts, convert_to_tensor=True)
    # the same direction as mean pooling: every token gets the same weight until the head learns
    assert torch.allclose(torch.nn.functional.cosine_similarity(before, after), torch.ones(2), atol=1e-6)
    with torch.no_grad():
        for p in head.parameters():
            p.normal_()
    trained = model.encode(texts, convert_to_tensor=True)
    assert not torch.allclose(trained, after, atol=1e-3)
    model.save(str(tmp_path / "m"))
    assert json.loads((tmp_path / "m" / "modules.json").read_text())[1]["type"] == "boolcl.pooling.ScopePooling"
    again = load_model(str(tmp_path / "m"))  # boolcl's own module: loads without trust_remote_code from the user
    assert isinstance(scope_pooling(again), ScopePooling) and scope_pooling(again).hidden == 8
    assert scope_pooling(again).mode == mode
    assert torch.equal(again.encode(texts, convert_to_tensor=True), trained)
    marker = tmp_path / "ran"
    (tmp_path / "m" / "evil.py").write_text(f"open({str(marker)!r}, 'w')\n")  # code beside it is never imported
    assert torch.equal(load_model(str(tmp_path / "m")).encode(texts, convert_to_tensor=True), trained)
    assert not marker.exists()
    scope_pooling(again).mode = "tokens" if mode == "parts" else "parts"  # the saved mode is the one it embeds by
    assert not torch.allclose(again.encode(texts, convert_to_tensor=True), trained, atol=1e-4)


def test_pooling_weights_are_ordinary_minus_drop_times_excluded_and_ignore_padding():
    torch.manual_seed(0)
    head = ScopePooling(6, drop=1.5, hidden=4)
    with torch.no_grad():
        for p in head.parameters():
            p.normal_()
    tokens = torch.randn(1, 5, 6)
    mask = torch.ones(1, 5, dtype=torch.long)
    out = head({"token_embeddings": tokens.clone(), "attention_mask": mask})
    p = out["scope_logits"].softmax(-1)[0]
    weight = p[:, ORDINARY] - 1.5 * p[:, EXCLUDED]
    assert torch.allclose(out["sentence_embedding"][0], (weight[:, None] * tokens[0]).sum(0) / 5, atol=1e-6)
    # the same sentence padded to 8 tokens: same logits on its tokens, same embedding
    padded = torch.cat([tokens, torch.randn(1, 3, 6)], 1)
    out2 = head({"token_embeddings": padded, "attention_mask": torch.tensor([[1] * 5 + [0] * 3])})
    assert torch.allclose(out2["scope_logits"][0, :5], out["scope_logits"][0], atol=1e-6)
    assert torch.allclose(out2["sentence_embedding"], out["sentence_embedding"], atol=1e-6)


def test_parts_pooling_is_the_kept_mean_minus_drop_times_the_excluded_mean_by_hand():
    """mode=parts: the question minus drop x what it excludes, whatever their lengths; computed by hand
    from chosen class probabilities (the head's output layer set so each token's class is near certain)."""
    tokens = torch.tensor([[[1.0, 0.0], [1.0, 2.0], [0.0, 4.0], [4.0, 0.0], [2.0, 2.0], [9.0, 9.0]]])
    # tokens 0-1 ordinary, 2 marker, 3-4 excluded, 5 padding
    head = ScopePooling(2, drop=0.5, hidden=2, mode="parts")
    classes = torch.tensor([ORDINARY, ORDINARY, MARKER, EXCLUDED, EXCLUDED, ORDINARY])
    p = torch.nn.functional.one_hot(classes, 3).float()[None]
    mask = torch.tensor([[1, 1, 1, 1, 1, 0]])
    weight = head.token_weights(p, mask)
    # 5 real tokens; ordinary mean (1, 1), excluded mean (3, 1), gate 1: (1, 1) - 0.5 * (3, 1) = (-0.5, 0.5)
    assert torch.allclose(weight, torch.tensor([[2.5, 2.5, 0.0, -1.25, -1.25, 0.0]]))
    pooled = (weight[..., None] * tokens).sum(1) / 5
    assert torch.allclose(pooled, torch.tensor([[-0.5, 0.5]]))
    # a longer excluded part (the same mean) subtracts the same; "tokens" mode subtracts by its length
    long_p = torch.nn.functional.one_hot(torch.tensor([ORDINARY, ORDINARY, MARKER, EXCLUDED, EXCLUDED, EXCLUDED]), 3)
    long_tokens = torch.tensor([[[1.0, 0.0], [1.0, 2.0], [0.0, 4.0], [4.0, 0.0], [2.0, 2.0], [3.0, 1.0]]])
    full = torch.ones(1, 6, dtype=torch.long)
    w = head.token_weights(long_p.float()[None], full)
    assert torch.allclose((w[..., None] * long_tokens).sum(1) / 6, torch.tensor([[-0.5, 0.5]]))
    by_tokens = ScopePooling(2, drop=0.5, hidden=2, mode="tokens").token_weights(long_p.float()[None], full)
    assert torch.allclose((by_tokens[..., None] * long_tokens).sum(1) / 6, torch.tensor([[-2.5 / 6, 0.5 / 6]]))
    # the gate: p(excluded) 0.01 on every token is an excluded part of 0.05 tokens against 4.95 kept, about a
    # hundredth (FULL_EXCLUSION is a tenth), so a tenth of the subtraction: the mean times 1 - 0.5 * 0.101
    soft = torch.tensor([[[0.99, 0.0, 0.01]] * 5 + [[1.0, 0.0, 0.0]]])
    w = head.token_weights(soft, mask)
    mean = tokens[0, :5].mean(0)
    assert torch.allclose((w[..., None] * tokens).sum(1)[0] / 5, mean * (1 - 0.5 * (0.05 / 4.95) / 0.1), atol=1e-6)
    # a real exclusion of one token against eight kept ones (more than a tenth) is subtracted in full
    one = torch.nn.functional.one_hot(torch.tensor([ORDINARY] * 8 + [EXCLUDED]), 3).float()[None]
    nine = torch.randn(1, 9, 2)
    w = head.token_weights(one, torch.ones(1, 9, dtype=torch.long))
    assert torch.allclose((w[..., None] * nine).sum(1) / 9, nine[:, :8].mean(1) - 0.5 * nine[:, 8], atol=1e-6)
    # the same exclusion in a 64-token text (QUESTION_LENGTH is 32) is subtracted by half
    long_text = torch.nn.functional.one_hot(torch.tensor([ORDINARY] * 56 + [EXCLUDED] * 8), 3).float()[None]
    x = torch.randn(1, 64, 2)
    w = head.token_weights(long_text, torch.ones(1, 64, dtype=torch.long))
    assert torch.allclose((w[..., None] * x).sum(1) / 64, x[:, :56].mean(1) - 0.5 * 0.5 * x[:, 56:].mean(1), atol=1e-5)
    with pytest.raises(ValueError, match="tokens, parts"):
        ScopePooling(2, mode="spans")


def test_only_mean_pooled_models_take_the_head(tiny_model_dir):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Pooling

    model = load_model(str(tiny_model_dir))
    cls = SentenceTransformer(modules=[model[0], Pooling(32, pooling_mode="cls")], device="cpu")
    with pytest.raises(ValueError, match="mean-pooled model; this one pools with 'cls'"):
        install(cls, 1.0)


def test_token_labels_follow_the_rules_and_the_templates(tiny_model_dir):
    tok = load_model(str(tiny_model_dir)).tokenizer
    texts = ["Which string instruments are not plucked?", "What is a cello?", "What causes it, the liver?"]
    spans = row_spans(texts, [True, False, True])
    assert spans[1] is None and spans[2] == UNKNOWN  # no exclusion the rules know: that row teaches nothing
    practice, span = practice_sentence("Besides {drop}, {keep_lc}?", "Which birds fly", "the ones in Peru")
    assert practice == "Besides the ones in Peru, which birds fly?"
    assert practice[slice(*span[0])] == "Besides" and practice[slice(*span[1])] == "the ones in Peru"
    prompt = "query: "
    f = tok([prompt + t for t in texts + [practice]], padding=True, return_offsets_mapping=True, return_tensors="pt")
    labels = token_labels(spans + [span], f["offset_mapping"], f["attention_mask"], len(prompt))
    words = tok.convert_ids_to_tokens(f["input_ids"][0])
    by_word = {w: int(lab) for w, lab in zip(words, labels[0])}
    assert by_word["are"] == by_word["not"] == MARKER and by_word["plucked"] == EXCLUDED
    assert by_word["string"] == by_word["query"] == by_word["[CLS]"] == by_word["?"] == ORDINARY
    assert (labels[0][f["attention_mask"][0] == 0] == IGNORE).all()
    assert (labels[1][f["attention_mask"][1] == 1] == ORDINARY).all() and (labels[2] == IGNORE).all()
    words = tok.convert_ids_to_tokens(f["input_ids"][3])
    assert [w for w, lab in zip(words, labels[3]) if lab == EXCLUDED] == ["the", "ones", "in", "peru"]
    assert [w for w, lab in zip(words, labels[3]) if lab == MARKER] == ["besides"]


@pytest.mark.parametrize("template,marker", [("{keep} other than {drop}?", "other than"),
                                             ("{keep}, with the exception of {drop}?", "with the exception of"),
                                             ("{drop} aside, {keep_lc}?", "aside")])
def test_practice_sentences_carry_exact_spans(template, marker):
    text, (m, x) = practice_sentence(template, "Which birds fly", "the ones in Peru")
    assert text[slice(*m)] == marker and text[slice(*x)] == "the ones in Peru"


def test_practice_sentences_are_fixed_by_seed_and_row():
    def item(q, kind):
        return Item(q, ["d"], ["p"], [], [], kind)

    items = [item("Which birds fly?", "simple"), item("Which birds swim other than penguins?", "not"),
             item("What do owls eat?", "simple")]
    make = ScopeSentences(items, ["{keep} other than {drop}?", "Besides {drop}, {keep_lc}?"], seed=3)
    assert make.drops == ["penguins"] and make.keeps == ["What do owls eat", "Which birds fly"]
    assert make(1) == ScopeSentences(items, make.templates, seed=3)(1)
    assert len({make(i) for i in range(12)}) > 1
    with pytest.raises(ConfigError, match="train.scope.warmup_practice"):
        ScopeSentences([items[0]], make.templates, seed=3)


def test_contrast_sentences_join_the_same_parts_and_are_ordinary_throughout():
    """Half the practice joins a kept question and an excluded part with a word that does not
    exclude; those rows carry no span, so every token of them is labelled ORDINARY."""
    items = [Item("Which birds fly?", ["d"], ["p"], [], [], "simple"),
             Item("Which birds swim other than penguins?", ["d"], ["p"], [], [], "not")]
    make = ScopeSentences(items, ["{keep} other than {drop}?"], seed=1, contrast=["{keep} and also {drop}?"])
    out = [make(i) for i in range(60)]
    contrast = [text for text, span in out if span is None]
    excluding = [text for text, span in out if span is not None]
    assert 15 < len(contrast) < 45 and contrast and excluding
    assert set(contrast) == {"Which birds fly and also penguins?"}
    assert set(excluding) == {"Which birds fly other than penguins?"}
    tok = load_model("offline-default").tokenizer
    f = dict(tok([t for t, _ in out], padding=True, return_offsets_mapping=True, return_tensors="pt"))
    labels = token_labels([span for _, span in out], f.pop("offset_mapping"), f["attention_mask"])
    is_contrast = torch.tensor([span is None for _, span in out])
    real = f["attention_mask"].bool()
    assert (labels[is_contrast][real[is_contrast]] == ORDINARY).all()
    assert (labels[~is_contrast] == EXCLUDED).any(1).all()
    # without contrast templates the draws are the exclusion practice alone
    alone = ScopeSentences(items, ["{keep} other than {drop}?"], seed=1)
    assert all(alone(i)[1] is not None for i in range(5))


def test_warm_up_finds_the_scope_of_held_out_questions():
    """Quality, on the real MiniLM: fitted alone on the sample's training clusters (the encoder
    frozen), the head marks the held-out clusters' NOT questions much as the rules do. (Training
    with the encoder took it to 98% in a `not_plus_tiny` run; docs/method.md: "Scope pooling".)
    The default warm-up stops once every class's recall on its own 512 rows reaches 99% (9 passes,
    162 steps here): 90.8% of the held-out tokens right and 83.7% of the excluded ones; training
    goes on from there."""
    model = load_model("offline-default")
    torch.manual_seed(0)  # the GRU's starting weights, as train() seeds them
    head = install(model, 1.0)
    rows = [json.loads(x) for x in (SAMPLE / "train.jsonl").read_text().splitlines()]
    items = [Item(r["question"], ["d"], ["p"], [], [], r["question_type"]) for r in rows]
    cfg = compose([]).train.scope
    report = warm_up(model, head, items, ScopeSentences(items, cfg.templates, seed=0), steps=cfg.warmup,
                     lr=cfg.lr, seed=0, until=cfg.warmup_until)
    assert report["token_accuracy"] > 0.95
    # proportionate: it stopped once every class was learnt, well before the most steps it may take
    assert report["steps"] < cfg.warmup and report["steps"] % report["batches_per_pass"] == 0, report
    assert min(report[f"recall_{c}"] for c in ("ordinary", "marker", "excluded")) >= cfg.warmup_until, report
    held_out = [json.loads(x)["question"] for x in (SAMPLE / "eval.jsonl").read_text().splitlines()
                if json.loads(x)["question_type"] == "not"]
    f = dict(model.tokenizer(held_out, padding=True, return_offsets_mapping=True, return_tensors="pt"))
    labels = token_labels(row_spans(held_out, [True] * len(held_out)), f.pop("offset_mapping"), f["attention_mask"])
    with torch.no_grad():
        predicted = model(f)["scope_logits"].argmax(-1)
    known = labels != IGNORE
    accuracy = (predicted[known] == labels[known]).float().mean()
    assert (labels[known] == ORDINARY).float().mean() < 0.6  # what the untrained head, all ORDINARY, scores
    assert accuracy > 0.8, accuracy
    recall = (predicted[labels == EXCLUDED] == EXCLUDED).float().mean()
    assert recall > 0.65, recall  # 0.74 measured after 300 steps; 0 untrained


def test_hidden_markers_swap_marker_words_for_ordinary_tokens_and_unlabel_them():
    O, M, X, I = ORDINARY, MARKER, EXCLUDED, IGNORE
    labels = torch.tensor([[O, O, M, M, X, O],    # an exclusion row: [CLS] w marker marker excluded [SEP]
                           [O, O, O, O, O, O],    # an ordinary row
                           [O, O, M, X, O, I]])   # an exclusion row, padded
    mask = (labels != I).long()
    tokens = torch.arange(3 * 6 * 2, dtype=torch.float).reshape(3, 6, 2)
    pool = ordinary_positions(labels, mask)
    # no [CLS], no last real token ([SEP]), no marker, excluded or padding
    assert pool.tolist() == [[0, 1], [1, 1], [1, 2], [1, 3], [1, 4], [2, 1]]
    # left padding: the same words, wherever the row starts
    left = torch.tensor([[I, O, O, M, X, O]])
    assert ordinary_positions(left, (left != I).long()).tolist() == [[0, 2]]
    x, y, rows = hidden_markers(tokens, labels, tokens, pool, 1.0, torch.Generator().manual_seed(0))
    assert rows.tolist() == [True, False, True]
    where = labels == M
    assert (y[where] == I).all() and torch.equal(y[~where], labels[~where])
    assert torch.equal(x[~where], tokens[~where])  # everything but the markers as it was
    ordinary_vectors = {tuple(tokens[r, c].tolist()) for r, c in pool.tolist()}
    assert all(tuple(v.tolist()) in ordinary_vectors for v in x[where])
    x0, y0, rows0 = hidden_markers(tokens, labels, tokens, pool, 0.0, torch.Generator().manual_seed(0))
    assert not rows0.any() and torch.equal(x0, tokens) and torch.equal(y0, labels)


def test_hidden_marker_loss_is_the_heads_cross_entropy_on_hidden_rows_and_teaches_the_head_only():
    O, M, X = ORDINARY, MARKER, EXCLUDED
    torch.manual_seed(0)
    head = ScopePooling(4, hidden=3)
    with torch.no_grad():
        for p in head.parameters():
            p.normal_()
    labels = torch.tensor([[O, O, M, X, X, O], [O, O, O, O, O, O]])
    mask = torch.ones_like(labels)
    tokens = torch.randn(2, 6, 4, requires_grad=True)
    torch.manual_seed(5)
    loss = HiddenMarkerLoss(head, 1.0)(tokens, labels, mask)
    torch.manual_seed(5)  # the same draws, by hand: only row 0 has a marker
    x, y, rows = hidden_markers(tokens.detach(), labels, tokens.detach(), ordinary_positions(labels, mask), 1.0)
    assert rows.tolist() == [True, False] and y[0, 2] == IGNORE
    logp = head.scope_logits(x[:1], mask[:1]).log_softmax(-1)[0]
    by_hand = -(logp[0, O] + logp[1, O] + logp[3, X] + logp[4, X] + logp[5, O]) / 5
    assert loss.item() == pytest.approx(by_hand.item(), rel=1e-5)
    loss.backward()
    assert tokens.grad is None  # the encoder is not taught by it
    assert head.rnn.weight_ih_l0.grad.abs().sum() > 0
    # no exclusion row in the batch: zero, but still through the head
    none = HiddenMarkerLoss(head, 1.0)(tokens, labels[1:].expand(2, -1), mask)
    assert none.item() == 0 and none.requires_grad


def test_hidden_markers_make_the_warm_up_fire_on_exclusion_words_it_never_saw():
    """Quality, on the real MiniLM: with half the exclusion rows' markers hidden in the warm-up,
    the head alone marks an exclusion in far more of the held-out NOT questions reworded with
    the two unseen wordings it mostly misses ("passing over", "with ... ruled out"), and still
    finds the held-out NOT questions' excluded tokens as the rules mark them. Measured: it fires
    on 36% of those questions without, 85% with; 83.7% and 84.4% of the excluded tokens found."""
    import importlib.util

    from boolcl.pooling import marks_exclusion

    script = ROOT / "scripts" / "reproduce" / "unseen_wordings.py"
    spec = importlib.util.spec_from_file_location("unseen_wordings", script)
    unseen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(unseen)

    class Always:  # reword() picks its wording with rng.choice: this one always picks `wording`
        def __init__(self, wording):
            self.wording = wording

        def choice(self, _):
            return self.wording

    held_out = [json.loads(x)["question"] for x in (SAMPLE / "eval.jsonl").read_text().splitlines()
                if json.loads(x)["question_type"] == "not"]
    hard = [w for w in unseen.UNSEEN_WORDINGS if "passing over" in w or "ruled out" in w]
    reworded = [q for w in hard for q in (unseen.reword(x, Always(w)) for x in held_out) if q]
    assert len(hard) == 2 and len(reworded) > 200
    rows = [json.loads(x) for x in (SAMPLE / "train.jsonl").read_text().splitlines()]
    items = [Item(r["question"], ["d"], ["p"], [], [], r["question_type"]) for r in rows]
    cfg = compose([]).train.scope
    fired, found = {}, {}
    for share in (0.0, 0.5):
        model = load_model("offline-default")
        torch.manual_seed(0)  # the GRU's starting weights, as train() seeds them
        head = install(model, 1.0)
        warm_up(model, head, items, ScopeSentences(items, cfg.templates, seed=0, contrast=cfg.contrast),
                steps=cfg.warmup, lr=cfg.lr, seed=0, until=cfg.warmup_until, hide_markers=share)
        with torch.no_grad():
            f = dict(model.tokenizer(reworded, padding=True, return_tensors="pt"))
            fired[share] = float(marks_exclusion(model(f)["scope_logits"], f["attention_mask"]).float().mean())
            g = dict(model.tokenizer(held_out, padding=True, return_offsets_mapping=True, return_tensors="pt"))
            labels = token_labels(row_spans(held_out, [True] * len(held_out)), g.pop("offset_mapping"),
                                  g["attention_mask"])
            predicted = model(g)["scope_logits"].argmax(-1)
            found[share] = float((predicted[labels == EXCLUDED] == EXCLUDED).float().mean())
    assert fired[0.5] >= fired[0.0] + 0.25, fired
    assert found[0.5] > 0.75 and found[0.0] > 0.75, found


def test_scope_config_errors_name_the_key():
    for override, key in [("train.scope.drop=-1", "train.scope.drop"), ("train.scope.lr=0", "train.scope.lr"),
                          ("train.scope.warmup=-2", "train.scope.warmup"),
                          ("train.scope.warmup_until=1.5", "train.scope.warmup_until"),
                          ("train.scope.warmup_rows=0", "train.scope.warmup_rows"),
                          ("train.scope.hide_markers=1.5", "train.scope.hide_markers"),
                          ("train.scope.shift=nan", "train.scope.shift"),
                          ("train.scope.contrast=['{keep} and also it?']", "train.scope.contrast"),
                          ("train.scope.templates=['{keep} minus it?']", "train.scope.templates"),
                          ("train.scope.templates=['{keep} {other} {drop}?']", "train.scope.templates")]:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            compose(["recipe=not_plus_tiny", override])


def test_scope_loss_averages_query_and_passage_cross_entropy():
    from boolcl.train.scope import ScopeLoss

    torch.manual_seed(0)
    q_logits, p_logits = torch.randn(2, 3, 3, requires_grad=True), torch.randn(1, 4, 3)
    labels = torch.tensor([[ORDINARY, MARKER, EXCLUDED], [ORDINARY, IGNORE, IGNORE]])
    p_mask = torch.tensor([[1, 1, 0, 0]])
    loss = ScopeLoss()(q_logits, labels, p_logits, p_mask)
    lq = -torch.log_softmax(q_logits, -1)
    by_hand_q = (lq[0, 0, 0] + lq[0, 1, 1] + lq[0, 2, 2] + lq[1, 0, 0]) / 4
    by_hand_p = -torch.log_softmax(p_logits, -1)[0, :2, ORDINARY].mean()
    assert loss.item() == pytest.approx(((by_hand_q + by_hand_p) / 2).item(), rel=1e-6)
    # rows that teach nothing leave only the passages' term, and no NaN
    empty = ScopeLoss()(q_logits, torch.full((2, 3), IGNORE), p_logits, p_mask)
    assert empty.item() == pytest.approx(by_hand_p.item() / 2, rel=1e-6)


def test_unseen_wordings_script_rewords_every_splittable_held_out_not_question(tmp_path):
    import importlib.util
    import re
    import subprocess
    import sys

    from boolcl.logic.rules import negation_span
    from boolcl.words import EXCLUSION_INFIX, UNSEEN_WORDINGS

    script = ROOT / "scripts" / "reproduce" / "unseen_wordings.py"
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "u")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(x) for x in (tmp_path / "u" / "eval.jsonl").read_text().splitlines()]
    original = [json.loads(x) for x in (SAMPLE / "eval.jsonl").read_text().splitlines()
                if json.loads(x)["question_type"] == "not"]
    splittable = [r for r in original if negation_span(r["question"]) is not None]
    assert len(rows) == len(splittable) and len(rows) > 100
    assert [r["qid"] for r in rows] == [r["qid"] for r in splittable]  # labels and passages kept
    assert all(r["positive_ctxs"] == o["positive_ctxs"] and r["question"] != o["question"]
               for r, o in zip(rows, splittable))
    spec = importlib.util.spec_from_file_location("unseen_wordings", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    templates = compose([]).train.scope.templates
    assert module.UNSEEN_WORDINGS is UNSEEN_WORDINGS
    for wording in UNSEEN_WORDINGS:  # words the rules and the practice templates never use
        words = " ".join(wording.replace("{keep}", " ").replace("{drop}", " ").strip(" ,?").split())
        assert not [m for m in EXCLUSION_INFIX if re.search(r"\b" + re.escape(m) + r"\b", words)], wording
        assert not [t for t in templates if words in t], wording


def test_marks_exclusion_counts_real_tokens_only():
    """A row fires when some real token's most likely class is EXCLUDED; padding never counts."""
    from boolcl.pooling import EXCLUDED, MARKER, ORDINARY, marks_exclusion

    logits = torch.zeros(3, 3, 3)
    logits[:, :, ORDINARY] = 1.0
    logits[0, 1, EXCLUDED] = 2.0  # a real token: fires
    logits[1, 2, EXCLUDED] = 2.0  # padding only: does not
    logits[2, 0, MARKER] = 2.0  # a marker is not an exclusion
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 1, 1]])
    assert marks_exclusion(logits, mask).tolist() == [True, False, False]
