"""Padding-free forward passes (`train.packed`): a batch's real tokens in one row.

A padded batch runs every layer over rows × longest row; with texts of mixed lengths much of
that is padding. Packed, the transformer sees the real tokens only, laid end to end: position
ids are each token's position in its padded row (so a text embeds as it does padded), and
attention stays within each text through `cu_seq_lens` (cumulative lengths), which
transformers passes down to the attention function. That function is boolcl's
(`PACKED`), registered with transformers' AttentionInterface. On CUDA a packed call goes
through torch's varlen flash kernel when there is no attention dropout, else through
scaled-dot-product attention over a nested (jagged) tensor, which keeps the dropout; on the
CPU, short texts are padded for the attention call alone, and long ones of mixed lengths get
one call each.
Any other call (evaluation, a padded batch) goes to the model's own attention as before.

Hooks on the SentenceTransformer's Transformer module pack its input and unpack its token
embeddings to (rows, tokens, dim), zero at padding, so pooling and every later module see
what they always see. The hooks are not saved with the model, and neither is the attention
setting (transformers does not write it to config.json): a packed run's checkpoint loads and
embeds like any other.
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from boolcl.errors import ConfigError
from boolcl.retrieval.models import inner_model

# On the CPU, short texts, or texts of about one length, share one attention call padded to the longest; long
# texts of mixed lengths get one call each, which leaves out the padding's quadratic cost. Measured on 2 cores, a
# training step: on 30 questions of 10-30 tokens the padded call's attention took a third of the loop's time; on the
# sample's passages (most cut at 96 tokens) the loop made not_plus_tiny's step 10% slower; on DistilBERT-base with
# texts of 18-242 tokens the loop was 1.19x faster (fill 0.36), and even at 16-120. (Nested tensors, the CUDA path,
# were 8-12x slower than either here.)
CPU_PAD_UP_TO = 64  # tokens: texts no longer than this always share one padded call
CPU_PAD_FILL = 0.5  # or when the real (query, key) pairs are at least this share of the padded call's
PACKED = "boolcl_packed"  # + "_" + the model's own implementation, which unpacked calls keep using


@functools.cache
def varlen_kernel():
    """torch's flash kernel for packed rows (torch >= 2.9), or None; imported on first use, as its
    import takes about a second, which a CPU run should not pay."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    return varlen_attn


def packed_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, *, fallback: str,
                     cu_seq_lens_q=None, max_length_q=None, **kwargs):
    """transformers' attention-function signature: query/key/value (1, heads, tokens, head dim) when
    packed, returning (1, tokens, heads, head dim) and no weights."""
    if cu_seq_lens_q is None:  # not packed: the model's own attention, untouched
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

        own = ALL_ATTENTION_FUNCTIONS[fallback] if fallback != "eager" else _eager(module)
        return own(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    q, k, v = (x[0].transpose(0, 1) for x in (query, key, value))  # (tokens, heads, head dim)
    if not q.is_cuda:
        longest, lengths = int(max_length_q), (cu_seq_lens_q[1:] - cu_seq_lens_q[:-1]).to(torch.float64)
        if longest > CPU_PAD_UP_TO and float((lengths ** 2).sum()) < CPU_PAD_FILL * len(lengths) * longest ** 2:
            return attention_per_text(q, k, v, cu_seq_lens_q, dropout, scaling)[None], None
        return padded_attention(q, k, v, cu_seq_lens_q, longest, dropout, scaling)[None], None
    varlen_attn = varlen_kernel() if dropout == 0.0 and q.dtype in (torch.float16, torch.bfloat16) else None
    if varlen_attn is not None:
        out = varlen_attn(q, k, v, cu_seq_lens_q, cu_seq_lens_q, int(max_length_q), int(max_length_q), scale=scaling)
        return out[None], None
    offsets = cu_seq_lens_q.to(torch.long)  # one jagged batch: flash or memory-efficient kernels, with dropout
    nested = [torch.nested.nested_tensor_from_jagged(x, offsets).transpose(1, 2) for x in (q, k, v)]
    out = F.scaled_dot_product_attention(*nested, dropout_p=dropout, scale=scaling)  # (texts, heads, j, head dim)
    return out.transpose(1, 2).values()[None], None


def attention_per_text(q, k, v, cu: torch.Tensor, dropout: float, scaling) -> torch.Tensor:
    """(tokens, heads, head dim) attention within each text, one call per text."""
    bounds = cu.tolist()
    return torch.cat([F.scaled_dot_product_attention(*(x[a:b].transpose(0, 1) for x in (q, k, v)),
                                                     dropout_p=dropout, scale=scaling).transpose(0, 1)
                      for a, b in zip(bounds[:-1], bounds[1:])])


def padded_attention(q, k, v, cu: torch.Tensor, longest: int, dropout: float, scaling) -> torch.Tensor:
    """(tokens, heads, head dim) attention within each text, padded for this one call, while the
    linear layers, most of the work, still see no padding."""
    lengths = cu[1:] - cu[:-1]
    keep = torch.arange(longest, device=q.device)[None, :] < lengths[:, None]

    def pad(x):
        return x.new_zeros((len(lengths), longest, *x.shape[1:])).index_put((keep,), x).transpose(1, 2)
    out = F.scaled_dot_product_attention(pad(q), pad(k), pad(v), attn_mask=keep[:, None, None, :],
                                         dropout_p=dropout, scale=scaling)
    return out.transpose(1, 2)[keep]


def _eager(module):
    """The model family's own eager attention (its modeling file defines one)."""
    import sys

    fn = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
    if fn is None:
        raise ConfigError(f"train.packed: {type(module).__name__} has no eager attention to fall back on")
    return fn


class Packing:
    """Pack the Transformer module's input before its forward and unpack its output after.

    Rows are taken as the attention mask has them (left or right padding alike); a batch with
    no padding runs as it is."""

    def __init__(self, module):
        self.pending: list[tuple[dict, torch.Tensor]] = []
        self.handles = [module.register_forward_pre_hook(self.before),  # after() also runs when forward raises
                        module.register_forward_hook(self.after, always_call=True)]

    def before(self, module, args):
        features = args[0]
        mask = features.get("attention_mask")
        if mask is None or bool(mask.all()):
            self.pending.append((features, None))
            return None
        keep = mask.bool()
        lengths = keep.sum(1)
        cu = F.pad(lengths.cumsum(0), (1, 0)).to(torch.int32)
        longest = int(lengths.max())
        positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
        packed = {k: v for k, v in features.items() if k not in ("input_ids", "attention_mask", "token_type_ids")}
        packed["input_ids"] = features["input_ids"][keep][None]
        if "token_type_ids" in features:
            packed["token_type_ids"] = features["token_type_ids"][keep][None]
        packed.update(position_ids=positions[keep][None], cu_seq_lens_q=cu, cu_seq_lens_k=cu,
                      max_length_q=longest, max_length_k=longest)
        self.pending.append((features, keep))
        return (packed, *args[1:])

    def after(self, module, args, output):
        features, keep = self.pending.pop()
        if keep is None or output is None:  # nothing packed, or the forward raised (it propagates)
            return output
        for name in ("token_embeddings", "all_layer_embeddings"):
            if name in output:
                value = output[name]
                features[name] = ([unpack(x, keep) for x in value] if isinstance(value, (tuple, list))
                                  else unpack(value, keep))
        return features

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def unpack(packed: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """(1, tokens, dim) back to (rows, width, dim), zero at padding; gradients flow through."""
    out = packed.new_zeros((*keep.shape, packed.shape[-1]))
    return out.index_put((keep,), packed[0])


def install(model) -> Packing:
    """Make every forward of the SentenceTransformer `model` padding-free (module 0 must be its
    transformer, whose model family takes `position_ids` and passes attention keyword arguments
    down, as BERT, DistilBERT and most others in transformers 5 do)."""
    module = model[0]
    inner = inner_model(module)
    if inner is None or not hasattr(inner, "config"):
        raise ConfigError("train.packed needs a transformers model as the first module")
    own = inner.config._attn_implementation or "sdpa"
    if not own.startswith(PACKED):
        from transformers import AttentionInterface

        name = f"{PACKED}_{own}"
        AttentionInterface.register(name, functools.partial(packed_attention, fallback=own))
        try:
            inner.set_attn_implementation(name)
        except (ValueError, TypeError) as e:
            raise ConfigError(f"train.packed: {type(inner).__name__} cannot take another attention function ({e})") from None
        if inner.config._attn_implementation != name:
            raise ConfigError(f"train.packed: {type(inner).__name__} does not dispatch its attention through "
                              "transformers' AttentionInterface, so it cannot run packed")
    return Packing(module)
