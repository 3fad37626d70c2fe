"""Log-probability of verb forms of any length (sub-token count), for every lexicon lemma.

The paper (and :mod:`verbeval.agreement.engine.inference`) scores only forms that are one token. Here every form
gets a log-probability in every context:

* **Causal LM** (exact): the chain rule over the form's sub-tokens,
  ``log P(t_1..t_k | c) = sum_i log P(t_i | c, t_<i)``. The context is run once (its key/value
  cache is kept); every distinct *proper prefix* ``t_1..t_j`` (j >= 1) of the forms is a node of a
  prefix trie whose next-token distribution is needed once. The trie's maximal prefixes are run
  as one batch of rows on top of the context's cache (expanded over the batch, not copied), and
  the LM head is applied only at one position per node. For k = 1 this is exactly the
  next-token probability the single-token pipeline uses.
* **Masked LM** (a heuristic, see ``docs/metrics.md``): pseudo-log-likelihood with *within-word
  left-to-right* masking (PLL-word-l2r, Kauf & Ivanova 2023, "A Better Way to Do Masked Language
  Model Scoring", ACL 2023): a form of k sub-tokens replaces the context's mask by k mask tokens;
  ``log P = sum_i log P(t_i | context, t_<i visible, t_>=i masked)``. Forms of the same length
  share the sequences of their shared prefixes (a trie per length). For k = 1 this is exactly the
  single-token score. Scores of forms with different k are not one normalised distribution.

Forms are encoded as in :mod:`verbeval.agreement.data.eligibility`: as the model sees them after a word in
running text (``Ġruns`` for byte-level BPE, ``▁walks`` for SentencePiece, ``runs`` for WordPiece),
without special tokens. Only the canonical tokenisation
is scored (no marginalisation over other segmentations), and, as for single tokens, no
end-of-word correction is applied (the probability of ``Ġrun`` includes continuations such as
``Ġrun|ning``; Pimentel & Meister 2024, "How to Compute the Probability of a Word").
"""

from __future__ import annotations

import copy
import inspect
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from verbeval.agreement.data.eligibility import form_token_ids as form_token_ids  # re-exported (tests, scripts)
from verbeval.agreement.engine.encoding import Encoded
from verbeval.agreement.engine.forward_pass import padding_id
from verbeval.core.errors import VerbevalError
from verbeval.core.memory import fit_batch_size, forward_bytes, free_memory, model_shape
from verbeval.core.models import LoadedModel

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- causal: prefix trie


@dataclass
class CausalTrie:
    """The forms' proper prefixes as trie nodes, laid out for batched evaluation.

    ``rows``: the maximal proper prefixes (token lists), run as input rows after the context.
    Node ``n`` is evaluated at ``rows[node_row[n]][node_pos[n]]``. Each (form, step) pair reads
    ``log P(step_token | node step_node)``; ``step_node`` is -1 for the first sub-token (read from
    the context's own next-token distribution).
    """

    n_forms: int
    rows: list[list[int]]
    node_row: np.ndarray
    node_pos: np.ndarray
    step_form: np.ndarray
    step_node: np.ndarray
    step_token: np.ndarray
    nodes_per_depth: dict[int, int] = field(default_factory=dict)


def build_causal_trie(forms: list[list[int]]) -> CausalTrie:
    """Prefix trie of token sequences (every sequence must be non-empty)."""
    nodes: dict[tuple[int, ...], int] = {}
    step_form, step_node, step_token = [], [], []
    for f, seq in enumerate(forms):
        if not seq:
            raise VerbevalError(f"form {f} encodes to no token")
        for j, tok in enumerate(seq):
            if j == 0:
                node = -1
            else:
                node = nodes.setdefault(tuple(seq[:j]), len(nodes))
            step_form.append(f)
            step_node.append(node)
            step_token.append(tok)
    keys = list(nodes)  # in creation order (deterministic)
    has_child = {k[:-1] for k in keys if len(k) > 1}
    maximal = sorted((k for k in keys if k not in has_child), key=lambda k: (-len(k), k))
    node_row = np.full(len(keys), -1, np.int64)
    node_pos = np.full(len(keys), -1, np.int64)
    for r, k in enumerate(maximal):
        for j in range(len(k)):
            n = nodes[k[: j + 1]]
            if node_row[n] < 0:
                node_row[n], node_pos[n] = r, j
    depth: dict[int, int] = {}
    for k in keys:
        depth[len(k)] = depth.get(len(k), 0) + 1
    return CausalTrie(
        len(forms),
        [list(k) for k in maximal],
        node_row,
        node_pos,
        np.asarray(step_form, np.int64),
        np.asarray(step_node, np.int64),
        np.asarray(step_token, np.int64),
        dict(sorted(depth.items())),
    )


def _lm_head(lm: LoadedModel) -> tuple[torch.nn.Module, torch.nn.Module]:
    """(body, head) of a causal LM: ``head(body(ids).last_hidden_state)`` are its logits."""
    head = lm.model.get_output_embeddings()
    if head is None:
        raise VerbevalError(f"{lm.model_id}: no output embeddings; cannot score multi-token forms")
    if getattr(lm.model.config, "final_logit_softcapping", None):
        raise VerbevalError(f"{lm.model_id}: final logit soft-capping is not supported for multi-token scoring")
    return lm.model.base_model, head


def cache_keyword(body: torch.nn.Module) -> str:
    """The keyword ``body.forward`` takes a key/value cache under: ``cache`` (transformers 5.24 and later
    renamed it; ``past_key_values`` is removed in 5.40), else ``past_key_values`` (models whose forward
    has not been renamed, e.g. remote code)."""
    params = inspect.signature(body.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _output_cache(res: Any) -> Any:
    """The key/value cache of a model output: ``cache`` in transformers' renamed outputs, else
    ``past_key_values``."""
    cache = getattr(res, "cache", None)
    return cache if cache is not None else res.past_key_values


def _expanded_cache(cache: Any, n: int) -> Any:
    """A fresh copy of a batch-1 cache viewed as batch ``n`` (expand: no copy of the tensors)."""
    c = copy.copy(cache)
    c.layers = [copy.copy(layer) for layer in cache.layers]
    for layer in c.layers:
        layer.keys = layer.keys.expand(n, *layer.keys.shape[1:])
        layer.values = layer.values.expand(n, *layer.values.shape[1:])
    return c


@dataclass
class _Batch:
    rows: np.ndarray  # row indices into trie.rows
    nodes: np.ndarray  # node ids evaluated in this batch
    local_row: np.ndarray
    pos: np.ndarray
    steps: np.ndarray  # step indices whose node is in this batch
    step_local: np.ndarray  # index into `nodes` of each step's node


def _plan_batches(trie: CausalTrie, batch_size: int) -> list[_Batch]:
    n_rows = len(trie.rows)
    out = []
    inner = trie.step_node >= 0
    for start in range(0, n_rows, batch_size):
        stop = min(start + batch_size, n_rows)
        nodes = np.flatnonzero((trie.node_row >= start) & (trie.node_row < stop))
        local = np.full(len(trie.node_row), -1, np.int64)
        local[nodes] = np.arange(len(nodes))
        steps = np.flatnonzero(inner & (local[np.where(inner, trie.step_node, 0)] >= 0))
        out.append(
            _Batch(
                np.arange(start, stop),
                nodes,
                trie.node_row[nodes] - start,
                trie.node_pos[nodes],
                steps,
                local[trie.step_node[steps]],
            )
        )
    return out


def _fit_rows(
    lm: LoadedModel, encoded: Encoded, batch_size: int, n_rows: int, width: int, *, causal: bool, whole: bool = False
) -> int:
    """``batch_size`` cut to the number of rows (trie rows or masked sequences) and to what fits in
    the device's free memory (:func:`verbeval.core.memory.fit_batch_size`), for the longest context.

    A causal row is ``width`` prefix tokens run after the context's cache (a batch materialises its
    own copy of the cache), read at up to ``width`` nodes; a masked row is the context with its mask
    widened to ``width`` slots, read at one position (``whole``: a model without a separate head,
    every position). Each read is a float32 logit row and its normaliser, 8 bytes per vocabulary entry.
    """
    if not encoded.ids or not n_rows:
        return max(1, batch_size)  # nothing is run
    shape = model_shape(lm.model)
    longest = max(len(s) for s in encoded.ids)
    if causal:
        per = forward_bytes(shape, width, past=longest) + width * shape.vocab * 8
    else:
        seq = longest - 1 + width
        per = forward_bytes(shape, seq) + (seq if whole else 1) * shape.vocab * 8
    unit = "trie row" if causal else "masked sequence"
    return fit_batch_size(
        batch_size,
        n_rows,
        per,
        free_memory(lm.device),
        what=lm.model_id,
        unit=unit,
        detail=f"vocabulary {shape.vocab}, context of {longest} tokens, {width}-token forms",
    )


def causal_form_logprobs(
    lm: LoadedModel,
    encoded: Encoded,
    forms: list[list[int]],
    *,
    batch_size: int = 256,
    progress: bool = True,
    desc: str = "forms",
) -> np.ndarray:
    """``[n_contexts, n_forms]`` float64: exact ``log P(form | context)`` by the chain rule."""
    trie = build_causal_trie(forms)
    body, head = _lm_head(lm)
    cache_kw = cache_keyword(body)
    dev = lm.device
    pad = padding_id(lm.tokenizer)
    batches = _plan_batches(
        trie,
        _fit_rows(lm, encoded, batch_size, len(trie.rows), max((len(r) for r in trie.rows), default=1), causal=True),
    )
    row_ids = []
    for b in batches:
        width = max(len(trie.rows[r]) for r in b.rows)
        ids = torch.full((len(b.rows), width), pad, dtype=torch.long)
        for i, r in enumerate(b.rows):
            ids[i, : len(trie.rows[r])] = torch.as_tensor(trie.rows[r])
        row_ids.append(ids.to(dev))
    root = trie.step_node < 0
    root_form = torch.as_tensor(trie.step_form[root], device=dev)
    root_tok = torch.as_tensor(trie.step_token[root], device=dev)
    step_form_t = torch.as_tensor(trie.step_form, device=dev)
    step_tok_t = torch.as_tensor(trie.step_token, device=dev)
    n = len(encoded.ids)
    out = np.zeros((n, trie.n_forms), np.float64)
    bar = tqdm(total=n, desc=desc, unit="ctx", disable=not progress, mininterval=1.0)
    with torch.inference_mode():
        for c, seq in enumerate(encoded.ids):
            res = body(input_ids=torch.as_tensor([seq], device=dev), use_cache=True)
            cache = _output_cache(res)
            # .to(dev): no-ops unless a device map puts the last layers or the head on another device
            root_lp = torch.log_softmax(head(res.last_hidden_state[0, -1]).to(dev).double(), dim=-1)
            acc = torch.zeros(trie.n_forms, dtype=torch.float64, device=dev)
            acc.index_add_(0, root_form, root_lp[root_tok])
            for b, ids in zip(batches, row_ids):
                if not len(b.nodes):
                    continue
                h = body(
                    input_ids=ids, **{cache_kw: _expanded_cache(cache, len(b.rows))}, use_cache=True
                ).last_hidden_state.to(dev)
                hn = h[torch.as_tensor(b.local_row, device=dev), torch.as_tensor(b.pos, device=dev)]
                logits = head(hn).to(dev).float()
                lse = torch.logsumexp(logits, dim=-1).double()  # float32 normaliser: |error| ~1e-6 in log P
                sl = torch.as_tensor(b.step_local, device=dev)
                st = torch.as_tensor(b.steps, device=dev)
                vals = logits[sl, step_tok_t[st]].double() - lse[sl]
                acc.index_add_(0, step_form_t[st], vals)
            out[c] = acc.cpu().numpy()
            bar.update(1)
    bar.close()
    return out


# --------------------------------------------------------------------------- masked: PLL-word-l2r


@dataclass
class MaskedPlan:
    """Nodes ``(k, prefix)``: a context whose mask became k slots, the first ``len(prefix)`` filled.

    ``node_tokens[n, :k]`` holds the prefix then mask ids; each node is read at slot ``len(prefix)``.
    """

    n_forms: int
    node_k: np.ndarray
    node_i: np.ndarray
    node_tokens: np.ndarray  # [M, k_max], -1 beyond k
    step_form: np.ndarray
    step_node: np.ndarray
    step_token: np.ndarray


def build_masked_plan(forms: list[list[int]], mask_id: int) -> MaskedPlan:
    nodes: dict[tuple[int, tuple[int, ...]], int] = {}
    step_form, step_node, step_token = [], [], []
    for f, seq in enumerate(forms):
        if not seq:
            raise VerbevalError(f"form {f} encodes to no token")
        k = len(seq)
        for i, tok in enumerate(seq):
            n = nodes.setdefault((k, tuple(seq[:i])), len(nodes))
            step_form.append(f)
            step_node.append(n)
            step_token.append(tok)
    k_max = max((k for k, _ in nodes), default=1)
    toks = np.full((len(nodes), k_max), -1, np.int64)
    node_k = np.empty(len(nodes), np.int64)
    node_i = np.empty(len(nodes), np.int64)
    for (k, prefix), n in nodes.items():
        node_k[n], node_i[n] = k, len(prefix)
        toks[n, : len(prefix)] = prefix
        toks[n, len(prefix) : k] = mask_id
    return MaskedPlan(
        len(forms),
        node_k,
        node_i,
        toks,
        np.asarray(step_form, np.int64),
        np.asarray(step_node, np.int64),
        np.asarray(step_token, np.int64),
    )


def _masked_head(lm: LoadedModel) -> torch.nn.Module | None:
    """The MLM head applied to the encoder's last hidden state (BERT ``cls``, RoBERTa ``lm_head``)."""
    for name in ("cls", "lm_head"):
        mod = getattr(lm.model, name, None)
        if isinstance(mod, torch.nn.Module):
            return mod
    return None


def masked_form_logprobs(
    lm: LoadedModel,
    encoded: Encoded,
    forms: list[list[int]],
    *,
    batch_size: int = 256,
    progress: bool = True,
    desc: str = "forms",
) -> np.ndarray:
    """``[n_contexts, n_forms]`` float64: PLL-word-l2r ``log P(form | context)`` (k = 1: exact)."""
    mask_id = lm.tokenizer.mask_token_id
    plan = build_masked_plan(forms, mask_id)
    head = _masked_head(lm)
    dev = lm.device
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else 0
    m_nodes = len(plan.node_k)
    order = np.lexsort((np.arange(m_nodes), plan.node_k))  # nodes of equal k together (same layout)
    local_of = np.empty(m_nodes, np.int64)
    local_of[order] = np.arange(m_nodes)
    step_form_t = torch.as_tensor(plan.step_form, device=dev)
    step_tok_t = torch.as_tensor(plan.step_token, device=dev)
    k_max = int(plan.node_k.max()) if m_nodes else 1
    bs = _fit_rows(lm, encoded, batch_size, m_nodes, k_max, causal=False, whole=head is None)
    step_pos = local_of[plan.step_node]  # node position in `order`
    step_groups = []  # per batch of nodes: (its steps, their node's index within the batch)
    for start in range(0, m_nodes, bs):
        st = np.flatnonzero((step_pos >= start) & (step_pos < start + bs))
        step_groups.append((torch.as_tensor(st, device=dev), torch.as_tensor(step_pos[st] - start, device=dev)))
    n = len(encoded.ids)
    out = np.zeros((n, plan.n_forms), np.float64)
    bar = tqdm(total=n, desc=desc, unit="ctx", disable=not progress, mininterval=1.0)
    with torch.inference_mode():
        for c, seq in enumerate(encoded.ids):
            m = int(encoded.target[c])
            left, right = np.asarray(seq[:m], np.int64), np.asarray(seq[m + 1 :], np.int64)
            width = len(seq) - 1 + int(plan.node_k.max())
            ids = np.full((m_nodes, width), pad, np.int64)
            att = np.zeros((m_nodes, width), np.int64)
            ids[:, :m] = left
            for k in np.unique(plan.node_k):
                sel = np.flatnonzero(plan.node_k[order] == k)
                rows = order[sel]
                ids[sel, m : m + k] = plan.node_tokens[rows, :k]
                ids[sel, m + k : m + k + len(right)] = right
                att[sel, : m + k + len(right)] = 1
            read_pos = m + plan.node_i[order]
            acc = torch.zeros(plan.n_forms, dtype=torch.float64, device=dev)
            for start, (st_b, loc_b) in zip(range(0, m_nodes, bs), step_groups):
                sl = slice(start, start + bs)
                width_b = int(att[sl].sum(1).max())
                ids_t = torch.as_tensor(ids[sl, :width_b], device=dev)
                att_t = torch.as_tensor(att[sl, :width_b], device=dev)
                pos_t = torch.as_tensor(read_pos[sl], device=dev)
                ar = torch.arange(ids_t.shape[0], device=dev)
                if head is not None:
                    h = lm.model.base_model(input_ids=ids_t, attention_mask=att_t).last_hidden_state.to(dev)
                    logits = head(h[ar, pos_t]).to(dev).float()  # .to(dev): see causal_form_logprobs
                else:
                    logits = lm.model(input_ids=ids_t, attention_mask=att_t).logits.to(dev)[ar, pos_t].float()
                lse = torch.logsumexp(logits, dim=-1).double()  # float32 normaliser: |error| ~1e-6 in log P
                one = torch.as_tensor(np.flatnonzero(plan.node_k[order[sl]] == 1), device=dev)
                if len(one):  # k = 1: float64, exactly as the single-token pipeline's softmax
                    lse[one] = torch.logsumexp(logits[one].double(), dim=-1)
                acc.index_add_(0, step_form_t[st_b], logits[loc_b, step_tok_t[st_b]].double() - lse[loc_b])
            out[c] = acc.cpu().numpy()
            bar.update(1)
    bar.close()
    return out


def form_logprobs(
    lm: LoadedModel,
    encoded: Encoded,
    forms: list[list[int]],
    *,
    batch_size: int = 256,
    progress: bool = True,
    desc: str = "forms",
) -> np.ndarray:
    """Dispatch on the model kind: chain rule (causal) or PLL-word-l2r (masked)."""
    fn = masked_form_logprobs if lm.kind == "masked" else causal_form_logprobs
    return fn(lm, encoded, forms, batch_size=batch_size, progress=progress, desc=desc)


def trie_size(forms: list[list[int]], kind: str, mask_id: int = 0) -> dict[str, Any]:
    """Cost figures: forms per length, and trie nodes (causal: prefixes per depth; masked: sequences)."""
    lengths = np.array([len(f) for f in forms])
    per_len = {int(k): int((lengths == k).sum()) for k in np.unique(lengths)}
    if kind == "causal":
        t = build_causal_trie(forms)
        return {
            "forms_per_length": per_len,
            "prefix_nodes_per_depth": t.nodes_per_depth,
            "rows": len(t.rows),
            "positions": int(sum(len(r) for r in t.rows)),
        }
    p = build_masked_plan(forms, mask_id)
    return {"forms_per_length": per_len, "sequences_per_context": len(p.node_k)}
