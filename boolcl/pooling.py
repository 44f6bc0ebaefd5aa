"""Scope pooling: mean pooling in which the tokens of an exclusion count against the query.

A mean-pooled question "X other than Y" sits between X and Y, so the passage about Y, the
one it excludes, ranks near the top. Taking Y's tokens with a negative weight puts the
question at about X - Y instead: with the untrained all-MiniLM-L6-v2 and the exclusion's
tokens marked by the decomposer's rules, weight -1 on them and 0 on the marker words lowers
NOT NegRecall@10 on the sample's held-out clusters from 99.2 to 43.3.

`ScopePooling` learns where the exclusion is: a small bidirectional GRU reads the contextual
token embeddings and says, per token, whether it is ordinary, a negation marker or inside
the exclusion; by default (mode `tokens`) the pooling weight is p(ordinary) - drop * p(excluded),
and mode `parts` subtracts the excluded part's mean from the kept part's (`ScopePooling`). A scope is a span
("after the marker, up to the comma or the end"), which a recurrent layer finds from the
marker alone: fitted on the frozen MiniLM's tokens, a linear head recalls 31% of the
held-out excluded tokens and the GRU 73%. The trainer teaches it from the rules' spans and
from template sentences (train/scope.py), so evaluation needs no rules. The output layer
starts at zero (every token the same weight), so a model fresh from `install` embeds
exactly like the one it came from, up to a constant factor.
"""
from __future__ import annotations

import torch

try:  # sentence-transformers >= 6
    from sentence_transformers.base.modules import Module
except ImportError:  # sentence-transformers 5
    from sentence_transformers.models import Module

ORDINARY, MARKER, EXCLUDED = 0, 1, 2  # the head's classes (train/scope.py labels tokens with them)
START_BIAS = 6.0  # p(ordinary) = 0.995 for every token before training


MODES = ("tokens", "parts")
FULL_EXCLUSION = 0.1  # parts: an excluded part this large against the kept one (in tokens) counts in full
QUESTION_LENGTH = 32  # parts: texts up to this many tokens count in full; a longer one by QUESTION_LENGTH / length


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"scope pooling mode must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


class ScopePooling(Module):
    """Weighted mean of token embeddings. `mode` says how the exclusion counts against the query:

    - tokens: each token weighs p(ordinary) - drop * p(excluded), so the excluded part pulls in
      proportion to its length: a long excluded part after a short question outweighs it and
      takes the query off its topic.
    - parts: the mean of the ordinary tokens minus drop * (the mean of the excluded tokens):
      the question minus drop times what it excludes, whatever their lengths. The subtraction
      is gated twice: by the excluded part's size against the kept part's, in full from a tenth
      (FULL_EXCLUSION) up, so a stray uncertain token does not count; and by the text's length,
      in full up to QUESTION_LENGTH tokens, so a passage or a query that is a whole argument,
      where "not" or "without" is rarely an exclusion, keeps about its mean."""

    config_keys = ["embedding_dimension", "drop", "hidden", "mode", "shift"]

    def __init__(self, embedding_dimension: int, drop: float = 1.0, hidden: int = 64, mode: str = "tokens",
                 shift: float = 0.0):
        super().__init__()
        self.embedding_dimension, self.drop, self.hidden = embedding_dimension, float(drop), hidden
        self.mode = check_mode(mode)
        self.shift = float(shift)  # added to the marker and excluded logits when embedding in eval mode
        self.rnn = torch.nn.GRU(embedding_dimension, hidden, batch_first=True, bidirectional=True)
        self.head = torch.nn.Linear(2 * hidden, 3)
        torch.nn.init.zeros_(self.head.weight)
        with torch.no_grad():
            self.head.bias.copy_(torch.tensor([START_BIAS, 0.0, 0.0]))

    def scope_logits(self, tokens: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(batch, tokens, 3) class logits, in float32 (a GRU in half precision is not worth the risk)."""
        lengths = attention_mask.sum(1).clamp(min=1).cpu()
        with torch.autocast(tokens.device.type, enabled=False):
            if bool((lengths == tokens.shape[1]).all()):  # no padding: packing would only cost time
                out, _ = self.rnn(tokens.float())
                return self.head(out)
            packed = torch.nn.utils.rnn.pack_padded_sequence(tokens.float(), lengths, batch_first=True,
                                                             enforce_sorted=False)
            out, _ = self.rnn(packed)  # packed: padding never leaks into the backward direction
            out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=tokens.shape[1])
            return self.head(out)

    def class_probabilities(self, logits: torch.Tensor, shift: float | None = None) -> torch.Tensor:
        """The token classes' probabilities the pooling weighs by: the head's, or with `shift`
        (default: the head's own) added to the two exclusion classes' logits, a logit adjustment
        after training (Menon et al., 2021; train.scope.shift, scripts/repool.py).

        The head learns from rows whose tokens are mostly ordinary, and on exclusion words it
        never saw it is unsure: it gives the excluded part less probability than the ordinary
        class, or marks only some of it, so too little is subtracted. A shift lets an unsure
        reading count (docs/method.md: "Scope pooling"). The trainer's scope loss and the
        diagnostics read the logits themselves, unshifted."""
        shift = self.shift if shift is None else shift
        if shift:
            adjust = [0.0] * 3
            adjust[MARKER] = adjust[EXCLUDED] = shift
            logits = logits + logits.new_tensor(adjust)
        return logits.softmax(-1)

    def token_weights(self, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(rows, tokens) weights in the pooled sum, from class probabilities p (rows, tokens, 3) and
        the attention mask, in units of a plain mean's (where every token weighs 1); 0 at padding."""
        mask = mask.to(p.dtype)
        ordinary, excluded = p[..., ORDINARY] * mask, p[..., EXCLUDED] * mask
        if self.mode == "tokens":
            return ordinary - self.drop * excluded
        n, kept, dropped = mask.sum(-1, keepdim=True), ordinary.sum(-1, keepdim=True), excluded.sum(-1, keepdim=True)
        gate = ((dropped / kept.clamp(min=1e-9) / FULL_EXCLUSION).clamp(max=1)
                * (QUESTION_LENGTH / n.clamp(min=1)).clamp(max=1))
        return n * (ordinary / kept.clamp(min=1e-9) - self.drop * gate * excluded / dropped.clamp(min=1e-9))

    def forward(self, features: dict, **kwargs) -> dict:
        tokens = features["token_embeddings"]
        mask = features["attention_mask"]
        logits = self.scope_logits(tokens, mask)
        # The shift is for retrieval (eval mode: encode(), evaluation, the saved model); training
        # pools by the head's own probabilities, which is how the shift's value was measured.
        p = self.class_probabilities(logits, shift=0.0 if self.training else None)
        weight = self.token_weights(p, mask).to(tokens.dtype).unsqueeze(-1)
        n = mask.to(tokens.dtype).sum(1).unsqueeze(-1)
        features["sentence_embedding"] = (weight * tokens).sum(1) / n.clamp(min=1e-9)
        features["scope_logits"] = logits  # for the trainer's scope loss
        return features

    def get_sentence_embedding_dimension(self) -> int:
        return self.embedding_dimension

    get_embedding_dimension = get_sentence_embedding_dimension

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.save_config(output_path)
        self.save_torch_weights(output_path, safe_serialization=safe_serialization)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token=None, cache_folder=None, revision=None,
             local_files_only: bool = False, **kwargs) -> "ScopePooling":
        hub = {"subfolder": subfolder, "token": token, "cache_folder": cache_folder, "revision": revision,
               "local_files_only": local_files_only}
        model = cls(**cls.load_config(model_name_or_path, **hub))
        return cls.load_torch_weights(model_name_or_path=model_name_or_path, model=model, **hub)


def scope_pooling(model) -> ScopePooling | None:
    return next((m for m in model.children() if isinstance(m, ScopePooling)), None)


def marks_exclusion(scope_logits: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """(rows,) bool: the head's most likely class is EXCLUDED for some real token of the row, which
    is what the diagnostics call "the head fires" (padding never counts)."""
    return ((scope_logits.argmax(-1) == EXCLUDED) & attention_mask.bool()).any(1)


def install(model, drop: float, hidden: int = 64, mode: str = "tokens", shift: float = 0.0) -> ScopePooling:
    """Swap a SentenceTransformer's mean pooling for scope pooling (kept if it has one already,
    with this drop, mode and shift).

    Raises ValueError for any other pooling: the head reweights a mean, and a CLS or max
    pooled model would change what it computes."""
    check_mode(mode)
    existing = scope_pooling(model)
    if existing is not None:
        existing.drop, existing.mode, existing.shift = float(drop), mode, float(shift)
        return existing
    try:
        from sentence_transformers.sentence_transformer.modules import Pooling
    except ImportError:  # sentence-transformers 5
        from sentence_transformers.models import Pooling

    for name, module in model.named_children():
        if isinstance(module, Pooling):
            cfg = module.get_config_dict()
            pools = cfg.get("pooling_mode")  # sentence-transformers 6; 5 has one flag per mode
            if pools is None:
                on = [k.removeprefix("pooling_mode_") for k, v in cfg.items() if k.startswith("pooling_mode_") and v]
                pools = on[0] if len(on) == 1 else "+".join(on)
            if pools not in ("mean", "mean_tokens"):
                raise ValueError(f"train.scope needs a mean-pooled model; this one pools with {pools!r}")
            head = ScopePooling(cfg.get("embedding_dimension") or cfg["word_embedding_dimension"], drop, hidden, mode,
                                shift)
            model._modules[name] = head.to(next(model.parameters()).device)
            return head
    raise ValueError("train.scope needs a model with a Pooling module; this one has none")
