"""Implicit reward of a language model (DPO; Rafailov et al. 2023, Razin et al. 2025).

    r(x, y) = beta * (log pi(y|x) - log pi_ref(y|x)),   log pi(y|x) = sum_t log pi(y_t | x, y_<t)

summed over the response tokens only, with a frozen reference pi_ref. Training and scoring
use the same tokenization (``encode_pair_text``), the same response mask, the same beta and
the same reference: the LoRA policy with its adapters switched off, or the base weights.
"""

from __future__ import annotations

import torch
from torch import nn

from rmlens.rewards._packing import Batch, Example, length_batches


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
        """(B, K) summed response log-probs under the reference model."""
        ref = self._reference[0]
        if ref is not None:
            return _logps(ref, batch)
        with self.lm.disable_adapter():
            return _logps(self.lm, batch)

    def rewards(self, batch: Batch) -> torch.Tensor:
        """(B, K) implicit rewards; uses ``batch.ref`` when the batch carries it."""
        ref = batch.ref if batch.ref is not None else self.reference_logps(batch)
        return implicit_reward(self(batch), ref, self.beta)


def _logps(lm: nn.Module, batch: Batch) -> torch.Tensor:
    decoder, head, cap = _parts(lm)
    hidden = decoder(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        use_cache=False,
    ).last_hidden_state  # (R, T, d)
    h = hidden.flatten(0, 1)[batch.pred]  # (B, K, L, d)
    logits = head(h)  # (B, K, L, V)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return response_logps(logits, batch.target, batch.tmask & batch.valid[..., None])


@torch.inference_mode()
def reference_logps(net: ImplicitNet, examples: list[Example], rt, batch_size: int) -> None:
    """Implicit RMs: the reference log-probs of every example still without them."""
    todo = [ex for ex in examples if ex.ref is None]
    for index in length_batches([ex.packed_length for ex in todo], batch_size):
        batch = rt.batch(todo, index)
        with rt.autocast():
            ref = net.reference_logps(batch).float().cpu()
        for b, i in enumerate(index):
            todo[i].ref = ref[b, : len(todo[i].seqs)].tolist()
