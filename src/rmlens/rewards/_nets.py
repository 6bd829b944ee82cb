"""The model wrapper of fine-tuned reward models: tokenized examples in as a :class:`Batch`,
rewards (B, K) out.

A batch encodes each example's shared prefix once. For a causal LM one packed row holds the
prefix (the templated prompt), then each response tail::

    tokens     p_0 .. p_{P-1} | c_P .. c_{n-1} | r_P .. r_{m-1}
    positions  0   ..  P-1    | P   ..  n-1    | P   ..  m-1

and a block mask lets a tail token see the prefix and the earlier tokens of its own tail
only, so each hidden state equals the one of that sequence run alone. Encoders attend both
ways (the prompt would see both responses), so they get one row per sequence.

The explicit RM reads a linear head on the pooled hidden state (:class:`ExplicitNet`); the
implicit RM is the DPO reward of a causal LM (Rafailov et al. 2023, Razin et al. 2025,
:class:`ImplicitNet`)::

    r(x, y) = beta * (log pi(y|x) - log pi_ref(y|x)),   log pi(y|x) = sum_t log pi(y_t | x, y_<t)

summed over the response tokens only, with a frozen reference pi_ref: the LoRA policy with
its adapters switched off, or the base weights. Training and scoring share the tokenization,
the response mask, beta and the reference. :class:`Runtime` says where batches run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np
import torch
from torch import nn

from rmlens.backbones import pool
from rmlens.progress import progress_bar
from rmlens.rewards._fast import additive, flat_mode, fused_layers, unit_mask
from rmlens.rewards._packing import Example, length_batches


@dataclass
class Batch:
    """Tensors of a batch of B examples with up to K sequences each, in R rows of T tokens.

    ``last``, ``pred`` index the flattened (R * T) token axis; ``rows`` gives each
    sequence's row (one row per sequence when not packed).
    """

    input_ids: torch.Tensor  # (R, T)
    attention_mask: torch.Tensor  # (R, T) 0/1, or (R, 1, T, T) additive block mask
    position_ids: torch.Tensor | None  # (R, T)
    last: torch.Tensor  # (B, K) flat index of each sequence's last token
    rows: torch.Tensor  # (B, K) row of each sequence
    valid: torch.Tensor  # (B, K) bool: sequence k exists
    pred: torch.Tensor  # (B, K, L) flat index of the token that predicts response token l
    target: torch.Tensor  # (B, K, L) the response token ids
    tmask: torch.Tensor  # (B, K, L) bool
    margin: torch.Tensor  # (B,)
    ref: torch.Tensor | None  # (B, K) reference log-probs
    index: np.ndarray  # (B,) positions of the examples in the list they came from
    # flat: each example's place in the row, (start, shared prefix, [tail lengths])
    spans: list | None = None

    def to(self, device) -> Batch:
        moved = {}
        for f in fields(self):
            value = getattr(self, f.name)
            moved[f.name] = value.to(device) if isinstance(value, torch.Tensor) else value
        return Batch(**moved)

    def run(self, model, **inputs):
        """``model(**inputs)`` on this batch's layout: a flat batch through
        ``_fast.flat_attention`` with its spans."""
        if self.spans is None:
            return model(**inputs)
        with flat_mode(model):
            return model(**inputs, rmlens_spans=self.spans)


def collate(
    examples: list[Example],
    index,
    *,
    pad_id: int,
    mode: str,
    side: str = "right",
    dtype: torch.dtype = torch.float32,
) -> Batch:
    """Build a :class:`Batch`.

    Parameters
    ----------
    mode : {"packed", "flat", "causal", "encoder", "encoder-flat"}
        packed: one row per example with the block mask; flat: the packed examples back to
        back in one row without padding, each example's place in it in ``spans`` as
        ``(start, shared, [n_1, n_2, ...])``, its first token, its shared prefix and its
        responses' tails (read by ``_fast.flat_attention``); causal: one row per sequence,
        padding mask and position ids; encoder: one row per sequence, padding mask only;
        encoder-flat: the encoder's sequences back to back in one row, each example's place
        in ``spans`` as ``(start, 0, [n_1, n_2, ...])`` and each sequence's
        number in ``rows`` (``ExplicitNet.pooled`` averages it on its own).
    side : {"right", "left"}
        Padding side; results do not depend on it (positions come from the layout).
    dtype : torch.dtype
        Dtype of the additive block mask (the model's compute dtype).
    """
    if mode == "encoder" and side != "right":
        raise ValueError("encoders are padded on the right (their position ids start at 0)")
    row_ids: list[list[int]] = []
    row_pos: list[list[int]] = []
    row_seg: list[list[int]] = []
    where: list[list[tuple[int, list[int]]]] = []
    for ex in examples:
        if mode in ("packed", "flat"):
            p = ex.shared
            ids, pos, seg, locs = list(ex.seqs[0][:p]), list(range(p)), [0] * p, []
            for k, s in enumerate(ex.seqs):
                start = len(ids)
                ids += s[p:]
                pos += range(p, len(s))
                seg += [k + 1] * (len(s) - p)
                locs.append(list(range(p)) + list(range(start, start + len(s) - p)))
            where.append([(len(row_ids), loc) for loc in locs])
            row_ids.append(ids), row_pos.append(pos), row_seg.append(seg)
        else:
            here = []
            for s in ex.seqs:
                here.append((len(row_ids), list(range(len(s)))))
                row_ids.append(list(s)), row_pos.append(list(range(len(s))))
                row_seg.append([1] * len(s))
            where.append(here)
    spans = None
    seq_rows = [[row for row, _ in here] for here in where]
    if mode in ("flat", "encoder-flat"):
        starts = np.cumsum([0] + [len(r) for r in row_ids])
        if mode == "flat":
            spans = [(int(a), ex.shared, [len(s) - ex.shared for s in ex.seqs])
                     for a, ex in zip(starts[:-1], examples)]  # fmt: skip
        else:
            spans = [(int(starts[here[0][0]]), 0, [len(row_ids[row]) for row, _ in here])
                     for here in where]  # fmt: skip
        where = [[(0, [int(starts[row]) + c for c in loc]) for row, loc in here]
                 for here in where]  # fmt: skip
        row_ids, row_pos, row_seg = ([sum(rows, [])] for rows in (row_ids, row_pos, row_seg))
    n_rows, width = len(row_ids), max(len(r) for r in row_ids)
    ids = torch.full((n_rows, width), pad_id, dtype=torch.long)
    pos = torch.zeros((n_rows, width), dtype=torch.long)
    seg = torch.full((n_rows, width), -1, dtype=torch.long)
    offset = [0 if side == "right" or spans else width - len(r) for r in row_ids]
    for r in range(n_rows):
        sl = slice(offset[r], offset[r] + len(row_ids[r]))
        ids[r, sl] = torch.tensor(row_ids[r])
        pos[r, sl] = torch.tensor(row_pos[r])
        seg[r, sl] = torch.tensor(row_seg[r])
    real = seg >= 0
    if mode == "packed":
        mask = block_mask(seg, dtype)
    elif spans is not None:
        mask = None
    else:
        mask = real.long()
    k_max = max(len(ex.seqs) for ex in examples)
    n_pred = [[sum(m) for m in ex.response] for ex in examples]
    l_max = max(1, max(max(n) for n in n_pred))
    shape = (len(examples), k_max)
    last, rows = torch.zeros(shape, dtype=torch.long), torch.zeros(shape, dtype=torch.long)
    valid = torch.zeros(shape, dtype=torch.bool)
    pred = torch.zeros((*shape, l_max), dtype=torch.long)
    target = torch.zeros((*shape, l_max), dtype=torch.long)
    tmask = torch.zeros((*shape, l_max), dtype=torch.bool)
    for b, ex in enumerate(examples):
        for k, (row, loc) in enumerate(where[b]):
            flat = [row * width + offset[row] + c for c in loc]
            seq_row = seq_rows[b][k] if mode == "encoder-flat" else row
            last[b, k], rows[b, k], valid[b, k] = flat[-1], seq_row, True
            js = [j for j, m in enumerate(ex.response[k]) if m]
            if js:
                pred[b, k, : len(js)] = torch.tensor([flat[j - 1] for j in js])
                target[b, k, : len(js)] = torch.tensor([ex.seqs[k][j] for j in js])
                tmask[b, k, : len(js)] = True
    ref = None
    if all(ex.ref is not None for ex in examples):
        ref = torch.zeros(shape, dtype=torch.float32)
        for b, ex in enumerate(examples):
            ref[b, : len(ex.ref)] = torch.tensor(ex.ref, dtype=torch.float32)
    return Batch(
        input_ids=ids,
        attention_mask=mask,
        position_ids=None if mode == "encoder" else pos,
        last=last,
        rows=rows,
        valid=valid,
        pred=pred,
        target=target,
        tmask=tmask,
        margin=torch.tensor([ex.margin for ex in examples], dtype=torch.float32),
        ref=ref,
        index=np.asarray(index),
        spans=spans,
    )


def block_mask(seg: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The additive block mask (R, 1, T, T) of rows whose tokens carry segment ids ``seg``
    (R, T): 0 the shared prefix, k the tail of sequence k, -1 padding. A token sees the
    earlier tokens of the prefix and of its own tail."""
    allowed = unit_mask(seg, causal=True)
    return additive(allowed[:, None], dtype)


class ExplicitNet(nn.Module):
    """r(x, y) = w . h(x, y) + b, h pooled as in ``backbones._featurize.pool``; ``forward``: (B, K).

    Causal LMs use the hidden state of each sequence's last token (found from the layout, so
    padding side and pad == eos do not matter); encoders mean-pool over real tokens.

    Parameters
    ----------
    body : nn.Module
        The backbone (``AutoModel``, with LoRA adapters or fully trainable); it returns
        ``last_hidden_state``.
    hidden_size : int
        d, the size of its hidden states: the head is ``nn.Linear(d, 1)``.
    pooling : {"last", "mean"}
        The last token of each sequence, or the mean over its real tokens.
    causal : bool
        Whether the body is a causal LM (run without its key-value cache).
    """

    def __init__(self, body: nn.Module, hidden_size: int, pooling: str, causal: bool):
        super().__init__()
        self.body, self.pooling, self.causal = body, pooling, causal
        self.head = nn.Linear(hidden_size, 1)

    def reset_head(self) -> None:
        bound = 1 / math.sqrt(self.head.in_features)
        nn.init.uniform_(self.head.weight, -bound, bound)
        nn.init.zeros_(self.head.bias)

    def forward(self, batch: Batch) -> torch.Tensor:
        h = self.pooled(batch).to(self.head.weight.dtype)
        with torch.autocast(h.device.type, enabled=False):  # the head in fp32 under bf16
            return self.head(h).squeeze(-1).float()  # (B, K)

    def pooled(self, batch: Batch) -> torch.Tensor:
        """What the head reads, per sequence of each example.

        Parameters
        ----------
        batch : Batch
            The packed batch (``Runtime.batch``).

        Returns
        -------
        Tensor of shape (B, K, d)
            h of each example's K sequences.
        """
        extra = {"use_cache": False} if self.causal else {}
        if batch.position_ids is not None:
            extra["position_ids"] = batch.position_ids
        hidden = batch.run(
            self.body, input_ids=batch.input_ids, attention_mask=batch.attention_mask, **extra
        ).last_hidden_state  # (R, T, d)
        if self.pooling == "last":
            return hidden.flatten(0, 1)[batch.last]  # (B, K, d)
        hidden = hidden.float()  # means summed in fp32
        if batch.spans is not None:  # encoder-flat: each sequence's own tokens
            sizes = [n for _, _, tails in batch.spans for n in tails]
            means = torch.stack([h.mean(0) for h in hidden[0].split(sizes)])  # (S, d)
            return means[batch.rows]  # (B, K, d)
        return pool(hidden, batch.attention_mask, "mean")[batch.rows]  # (B, K, d)

    def rewards(self, batch: Batch) -> torch.Tensor:
        return self(batch)


def response_logps(logits: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Summed log-probabilities of the response tokens.

    Parameters
    ----------
    logits : Tensor of shape (..., L, V)
        Logits at the positions that predict each response token.
    target : Tensor of shape (..., L)
        The response tokens.
    mask : Tensor of shape (..., L), bool
        Real response tokens (False on padding).

    Returns
    -------
    Tensor of shape (...)
    """
    logp = torch.log_softmax(logits.float(), dim=-1)  # (..., L, V)
    picked = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (..., L)
    return (picked * mask).sum(-1)


def implicit_reward(policy_logps: torch.Tensor, ref_logps: torch.Tensor, beta: float):
    """beta * (log pi(y|x) - log pi_ref(y|x)); shapes (n,) or (B, K)."""
    return beta * (policy_logps - ref_logps)


def _parts(lm: nn.Module) -> tuple[nn.Module, nn.Module, float | None]:
    base = lm.get_base_model() if hasattr(lm, "get_base_model") else lm
    cap = getattr(base.config, "final_logit_softcapping", None)
    return base.get_decoder(), base.get_output_embeddings(), cap


class ImplicitNet(nn.Module):
    """A causal LM as a scorer of summed response log-probs; ``forward`` gives (B, K).

    The language-model head runs only at the positions that predict a response token, so
    the prompt costs no (T x vocabulary) logits.

    Parameters
    ----------
    lm : PreTrainedModel or PeftModel
        The policy (``AutoModelForCausalLM``, with LoRA adapters or fully trainable).
    beta : float
        The implicit reward's scale: r = beta (log pi(y|x) - log pi_ref(y|x)).
    reference : nn.Module, optional
        A frozen reference LM; None means the policy with its LoRA adapters disabled.
    """

    def __init__(self, lm: nn.Module, beta: float, reference: nn.Module | None = None):
        super().__init__()
        self.lm, self.beta = lm, beta
        self._reference = [reference]  # a list: kept out of parameters() and state_dict()

    def forward(self, batch: Batch) -> torch.Tensor:
        return _logps(self.lm, batch)

    @torch.no_grad()
    def reference_logps(self, batch: Batch) -> torch.Tensor:
        """Summed response log-probs under the reference model.

        Parameters
        ----------
        batch : Batch
            The packed batch (``Runtime.batch``).

        Returns
        -------
        Tensor of shape (B, K)
            log pi_ref(y|x) of each example's K responses.
        """
        ref = self._reference[0]
        if ref is not None:
            return _logps(ref, batch)
        with self.lm.disable_adapter():
            return _logps(self.lm, batch)

    def rewards(self, batch: Batch) -> torch.Tensor:
        """The implicit rewards of a batch.

        Parameters
        ----------
        batch : Batch
            The packed batch; its ``ref`` log-probs are used when it carries them.

        Returns
        -------
        Tensor of shape (B, K)
            beta (log pi(y|x) - log pi_ref(y|x)).
        """
        ref = batch.ref if batch.ref is not None else self.reference_logps(batch)
        return implicit_reward(self(batch), ref, self.beta)

    @torch.inference_mode()
    def fill_references(self, examples: list[Example], rt: Runtime, batch_size: int) -> None:
        """Set ``ref``, the reference log-probs, of every example still without it: computed
        once per pair, never again per epoch.

        Parameters
        ----------
        examples : list of Example
            The tokenized examples, changed in place.
        rt : Runtime
            Device and precision.
        batch_size : int
            Examples per forward pass.
        """
        todo = [ex for ex in examples if ex.ref is None]
        for index in length_batches([ex.packed_length for ex in todo], batch_size):
            batch = rt.batch(todo, index)
            with rt.autocast():
                ref = self.reference_logps(batch).float().cpu()
            for b, i in enumerate(index):
                todo[i].ref = ref[b, : len(todo[i].seqs)].tolist()


def _logps(lm: nn.Module, batch: Batch) -> torch.Tensor:
    decoder, head, cap = _parts(lm)
    hidden = batch.run(
        decoder,
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        use_cache=False,
    ).last_hidden_state  # (R, T, d)
    h = hidden.flatten(0, 1)[batch.pred]  # (B, K, L, d)
    with torch.autocast(h.device.type, enabled=False):  # log-probs from fp32 logits
        logits = head(h.to(head.weight.dtype))  # (B, K, L, V)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return response_logps(logits, batch.target, batch.tmask & batch.valid[..., None])


def padding_share(examples: list[Example]) -> float:
    """The share of a packed batch's tokens that would be padding."""
    lengths = [ex.packed_length for ex in examples]
    return 1.0 - sum(lengths) / (len(lengths) * max(lengths))


def flat_pays(examples: list[Example]) -> bool:
    """Whether a flat batch beats the padded one. It saves the padding and the masked
    attention blocks, and pays per example what the padded batch pays once (two attention
    calls a layer against one): short, nearly unpadded examples run padded (SmolLM2-135M,
    2 threads: flat 2.6% slower on 65-token pairs with 1% to 2% padding, 7% to 16% faster on
    250-token pairs with 10% to 18%)."""
    short = np.mean([ex.packed_length for ex in examples]) < 128
    return not (short and padding_share(examples) < 0.05)


@dataclass
class Runtime:
    """How batches are laid out, where they run and in which precision.

    ``precision`` is the resolved one (fp32 or bf16). In bf16 every pass runs under bf16
    autocast (:meth:`autocast`): the matmuls in bf16, the residual stream fp32; a LoRA
    network's frozen linear weights are held in bf16 (``_base_model.hold_frozen``), one
    trained in full keeps fp32 weights, cast per call.
    """

    # "packed" | "flat" | "auto" (flat or packed, per batch) | "causal" | "encoder" |
    # "encoder-flat"
    mode: str
    pad_id: int
    device: str = "cpu"
    precision: str = "fp32"
    side: str = "right"
    # the decoder layers run flat batches compiled (``_fast.compiled_layers``): ``auto``
    # lays every batch out flat, short ones included (SmolLM2-135M, 96 HH pairs at 128
    # tokens, bf16, 2 threads: a whole ``rmlens train`` epoch 9.2 s flat against 12.9 s
    # with the short batches padded)
    compiled: bool = False

    @property
    def dtype(self) -> torch.dtype:
        return torch.bfloat16 if self.precision == "bf16" else torch.float32

    def batch(self, examples: list[Example], index):
        chosen = [examples[i] for i in index]
        mode = self.mode
        if mode == "auto":
            mode = "flat" if self.compiled or flat_pays(chosen) else "packed"
        return collate(
            chosen, index, pad_id=self.pad_id, mode=mode, side=self.side, dtype=self.dtype
        ).to(self.device)

    def autocast(self):
        kind = self.device.split(":")[0]
        return torch.autocast(kind, torch.bfloat16, enabled=self.precision == "bf16")


@torch.inference_mode()
def score_examples(
    net,
    examples: list[Example],
    rt: Runtime,
    *,
    batch_size: int,
    quiet: bool = True,
    label: str = "scoring",
    method: str = "rewards",
) -> np.ndarray:
    """Rewards (n, K) of every example (NaN where a ranking has fewer than K responses).

    Batches run longest first; each example's rewards do not depend on the batch.
    ``method``: the net's method to call per batch, giving (B, K, ...) values
    (``"pooled"``: an explicit RM's pooled hidden states, (n, K, d)).
    """
    training = net.training
    net.eval()
    k_max = max((len(ex.seqs) for ex in examples), default=2)
    out = np.full((len(examples), k_max), np.nan)
    with fused_layers(net), progress_bar(label, total=len(examples), quiet=quiet) as advance:
        for index in length_batches([ex.packed_length for ex in examples], batch_size):
            batch = rt.batch(examples, index)
            with rt.autocast():
                r = getattr(net, method)(batch).float().cpu().numpy()
            if out.ndim != r.ndim:
                out = np.full((len(examples), k_max, *r.shape[2:]), np.nan)
            for b, i in enumerate(index):
                out[i, : len(examples[i].seqs)] = r[b, : len(examples[i].seqs)]
            advance(len(index))
    net.train(training)
    return out
