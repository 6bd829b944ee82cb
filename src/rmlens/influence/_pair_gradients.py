"""Per-pair gradients of a fine-tuned RM's reward difference, in one batched backward pass.

Gauss-Newton influence through the trained parameters (``_gauss_newton``) needs, for every
pair j, the gradient J_j of d_j = r(x, y+) - r(x, y-) with respect to the run's trainable
parameters theta (LoRA adapters and the score head). A LoRA adapter and the
head are linear layers y = W x, so J_j's block of W is sum_t delta_t x_t' over the tokens of
pair j's sequences, delta_t the gradient of d_j at the layer's output: the same outer
products a backward pass forms for the whole batch, kept per example (the trick of Opacus
and of influence packages such as kronfluence and bergson). Since d_j depends on example j's
rows only, one backward of sum_j d_j gives every example's delta at once. Each row of a
batch holds one example's sequences (``rmlens.rewards``' collate), so rows are summed per example.

Full fine-tuning also trains tensors that are not linear layers (embeddings, norms): its
gradients are taken pair by pair instead, through every trained tensor.

When n x P is too large to keep (a large run or a large model), each gradient is sketched to
``dim`` coordinates with a CountSketch (each parameter hashed to one coordinate with a random
sign), which keeps inner products in expectation: the influence solve needs J J' only.

The network and its batches are duck-typed: ``net(batch)`` gives rewards (B, 2) of
``rt.batch(examples, index)``, under ``rt.autocast()`` (``rmlens.rewards``' explicit net and
its runtime).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

EXACT_BUDGET = 1 << 29  # floats of n x P kept exactly (2 GiB); sketched above
SKETCH_MIN = 4096  # coordinates of a sketch, at least


def trainable_linears(net: nn.Module) -> tuple[list[tuple[str, nn.Linear]], list[str]]:
    """The linear layers with trainable weights, and the names of the trainable tensors
    outside them (full fine-tuning's embeddings and norms)."""
    linears = [(n, m) for n, m in net.named_modules()
               if isinstance(m, nn.Linear) and m.weight.requires_grad]  # fmt: skip
    covered = {id(p) for _, m in linears for p in m.parameters(recurse=False)}
    other = [n for n, p in net.named_parameters() if p.requires_grad and id(p) not in covered]
    return linears, other


def n_params(linears: list[tuple[str, nn.Linear]]) -> int:
    return sum(_size(m) for _, m in linears)


def _size(module: nn.Linear) -> int:
    return sum(p.numel() for p in module.parameters(recurse=False) if p.requires_grad)


class _Capture:
    """Forward hooks that keep each linear layer's input and, through a tensor hook, the
    gradient at its output."""

    def __init__(self, linears):
        self.inputs, self.grads, self.handles = {}, {}, []
        for name, module in linears:
            self.handles.append(module.register_forward_hook(self._hook(name)))

    def _hook(self, name):
        def hook(module, args, output):
            self.inputs[name] = args[0].detach()
            output.register_hook(lambda g: self.grads.__setitem__(name, g.detach()))

        return hook

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def _row_examples(batch, n_rows: int) -> torch.Tensor:
    """The example (0..B-1) each row of a batch belongs to."""
    owner = torch.full((n_rows,), -1, dtype=torch.long)
    b, k = torch.nonzero(batch.valid.cpu(), as_tuple=True)
    owner[batch.rows.cpu()[b, k]] = b
    return owner


def _per_example(x: torch.Tensor, g: torch.Tensor, module: nn.Linear, batch, size: int,
                 head: bool):  # fmt: skip
    """Per-example gradient of one linear layer, flattened: (B, out * in [+ out]); a
    backbone layer reads rows of tokens (R, T, in), the head each example's pooled states."""
    x, g = x.float(), g.float()
    bias = module.bias is not None and module.bias.requires_grad
    spans = getattr(batch, "spans", None)
    if not head and spans is not None:  # a flat batch: example b holds tokens a..e of one row
        x, g = x.reshape(-1, x.shape[-1]), g.reshape(-1, g.shape[-1])
        bounds = [(a, a + shared + sum(n for n, _ in tails)) for a, shared, tails in spans]
        w = torch.stack([g[a:e].t() @ x[a:e] for a, e in bounds]).flatten(1)
        return torch.cat([w, torch.stack([g[a:e].sum(0) for a, e in bounds])], 1) if bias else w
    if not head:
        owner = _row_examples(batch, x.shape[0]).to(x.device)
        w = torch.einsum("rto,rti->roi", g, x).flatten(1)
        parts = [w] + ([g.sum(1)] if bias else [])
        rows = torch.cat(parts, 1)
        out = torch.zeros(size, rows.shape[1], device=x.device)
        return out.index_add_(0, owner.clamp(min=0), rows * (owner >= 0)[:, None])
    x, g = x.reshape(size, -1, x.shape[-1]), g.reshape(size, -1, g.shape[-1])  # the head
    w = torch.einsum("bko,bki->boi", g, x).flatten(1)
    if bias:
        w = torch.cat([w, g.sum(1)], 1)
    return w


def pair_gradients(
    net, examples, rt, *, batches: list[np.ndarray], dim: int | None = None, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Rewards (n, 2) and J (n, q), float32: row j of J the gradient of pair j's reward
    difference with respect to the trainable parameters (q = P), or its CountSketch.

    The rewards come from the same forward pass, so a run that needs J scores its pairs at
    no extra cost.

    Parameters
    ----------
    net : nn.Module
        The RM's network: ``net(batch)`` gives rewards (B, 2); the trainable tensors are
        those with ``requires_grad``.
    examples : list
        Every pair's tokenized example.
    rt : object
        The runtime: ``rt.batch(examples, index)`` and ``rt.autocast()``.
    batches : list of ndarray of int
        The index batches of ``examples`` to run (a batch's rows must fit memory; a run
        uses ``rmlens.rewards``' length batches, longest first).
    dim : int, optional
        Sketch J to this many coordinates; None: exact while n x P fits ``EXACT_BUDGET``,
        else the largest sketch that does.
    seed : int, default=0
        Seed of the sketch's hashes and signs.

    Returns
    -------
    rewards : ndarray of shape (n, 2)
        Rewards of chosen and rejected.
    jac : ndarray of shape (n, q), float32
        J, or its sketch (q = ``dim``).
    """
    linears, other = trainable_linears(net)
    if other:  # full fine-tuning: not every trained tensor is a linear layer's
        return _pair_by_pair(net, examples, rt, dim=dim, seed=seed)
    total = n_params(linears)
    n = len(examples)
    dim = _sketch_dim(dim, n, total)
    device = next(net.parameters()).device
    sketch = None
    if dim:
        sketch = dict(zip([name for name, _ in linears],
                          count_sketch([_size(m) for _, m in linears], dim, seed, device)))
    out = np.zeros((n, dim or total), dtype=np.float32)
    rewards = np.zeros((n, 2))
    training = net.training
    net.eval()
    capture = _Capture(linears)
    try:
        for index in batches:
            batch = rt.batch(examples, index)
            net.zero_grad(set_to_none=True)
            with torch.enable_grad(), rt.autocast():
                r = net(batch)
                (r[:, 0] - r[:, 1]).sum().backward()
            rewards[np.asarray(index)] = r.detach().float().cpu().numpy()[:, :2]
            blocks = []
            for name, module in linears:
                if name in capture.grads:
                    flat = _per_example(capture.inputs[name], capture.grads[name], module,
                                        batch, len(index), head=name == "head")  # fmt: skip
                else:  # a layer the rewards do not read (e.g. an encoder's pooler)
                    flat = torch.zeros(len(index), _size(module), device=r.device)
                if sketch is None:
                    blocks.append(flat)
                else:
                    where, sign = sketch[name]
                    blocks.append(torch.zeros(len(index), dim, device=flat.device).index_add_(
                        1, where, flat * sign))  # fmt: skip
            rows = torch.cat(blocks, 1) if sketch is None else sum(blocks)
            out[np.asarray(index)] = rows.cpu().numpy()
            capture.inputs.clear()
            capture.grads.clear()
    finally:
        capture.close()
        net.zero_grad(set_to_none=True)
        net.train(training)
    return rewards, out


def _sketch_dim(dim: int | None, n: int, total: int) -> int | None:
    """The sketch's coordinates (None: exact): ``dim`` when given and below ``total``, else
    the largest that keeps n x dim within ``EXACT_BUDGET`` once n x total would not."""
    if dim is None and n * total > EXACT_BUDGET:
        dim = max(SKETCH_MIN, EXACT_BUDGET // max(n, 1))
    return dim if dim and dim < total else None


def count_sketch(sizes: list[int], dim: int, seed: int, device) -> list[tuple]:
    """Per tensor of ``sizes`` parameters: each parameter's coordinate (of ``dim``) and its
    random sign, drawn from ``seed``, on ``device`` (made once per pass, not per batch)."""
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, dim, (size,), generator=gen).to(device),
             (torch.randint(0, 2, (size,), generator=gen).float() * 2 - 1).to(device))
            for size in sizes]  # fmt: skip


def _pair_by_pair(net, examples, rt, *, dim: int | None, seed: int):
    """Full fine-tuning's per-pair gradients: one backward pass per pair through every
    trained tensor, each sketched as it comes when n x P passes the budget (a full model's
    P is tens of millions): the same (rewards, J) as ``pair_gradients``, slower."""
    params = [(n, p) for n, p in net.named_parameters() if p.requires_grad]
    total = sum(p.numel() for _, p in params)
    dim = _sketch_dim(dim, len(examples), total)
    device = params[0][1].device
    sketch = count_sketch([p.numel() for _, p in params], dim, seed, device) if dim else None
    out = np.zeros((len(examples), dim or total), dtype=np.float32)
    rewards = np.zeros((len(examples), 2))
    training = net.training
    net.eval()
    try:
        for i in range(len(examples)):
            with torch.enable_grad(), rt.autocast():
                r = net(rt.batch(examples, [i]))
                grads = torch.autograd.grad(r[0, 0] - r[0, 1], [p for _, p in params],
                                            allow_unused=True)  # fmt: skip
            rewards[i] = r.detach().float().cpu().numpy()[0, :2]
            flat = [torch.zeros(p.numel(), device=p.device) if g is None else g.float().flatten()
                    for (_, p), g in zip(params, grads)]  # fmt: skip
            if sketch is None:
                out[i] = torch.cat(flat).cpu().numpy()
            else:
                row = torch.zeros(dim, device=device)
                for f, (where, sign) in zip(flat, sketch):
                    row.index_add_(0, where, f * sign)
                out[i] = row.cpu().numpy()
    finally:
        net.train(training)
    return rewards, out
