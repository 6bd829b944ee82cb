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

from collections.abc import Callable, Iterator
from contextlib import contextmanager

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


def through_last(net: nn.Module, blocks: int) -> int:
    """Keep gradients on the linear layers of the last ``blocks`` transformer blocks of
    ``net`` and on its ``head``, and off every other tensor.

    A cheaper reading of a full or merged RM: the per-pair gradients of linear layers come
    from one batched backward pass (outer products, above), and the pass stops at the
    earliest block read, where every weight (embeddings and norms too) needs one backward
    pass per pair through the whole network. The blocks are the longest ``nn.ModuleList``
    in ``net`` (``layers`` of Llama-like models, ``encoder.layer`` of BERT-like ones); in a
    LoRA RM only the adapters of those blocks stay.

    Parameters
    ----------
    net : nn.Module
        The RM's network, with a ``head`` and its trained tensors requiring gradients.
    blocks : int
        How many of the last blocks to read (all of them when it exceeds their number).

    Returns
    -------
    int
        The trained tensors kept.
    """
    lists = [m for m in net.modules() if isinstance(m, nn.ModuleList)]
    if not lists:
        raise ValueError("no nn.ModuleList of blocks in the network")
    stack = max(lists, key=len)
    kept = {id(p) for block in list(stack)[-blocks:] for m in block.modules()
            if isinstance(m, nn.Linear) for p in m.parameters(recurse=False)}  # fmt: skip
    kept |= {id(p) for p in net.head.parameters()}
    count = 0
    for param in net.parameters():
        keep = param.requires_grad and id(param) in kept
        param.requires_grad_(keep)
        count += keep
    return count


@contextmanager
def reading_last(net: nn.Module, blocks: int | None) -> Iterator[None]:
    """:func:`through_last` for the duration of the block, the trained tensors'
    ``requires_grad`` restored after it.

    Parameters
    ----------
    net : nn.Module
        The RM's network, as :func:`through_last` takes it.
    blocks : int or None
        How many of the last blocks to read; None changes nothing (the flags are still
        restored).

    Raises
    ------
    ValueError
        When ``net`` has no blocks (:func:`through_last`).
    """
    trained = [param.requires_grad for param in net.parameters()]
    try:
        if blocks is not None:
            through_last(net, blocks)
        yield
    finally:
        for param, flag in zip(net.parameters(), trained):
            param.requires_grad_(flag)


def n_params(linears: list[tuple[str, nn.Linear]]) -> int:
    return sum(_size(m) for _, m in linears)


def _size(module: nn.Linear) -> int:
    return sum(p.numel() for p in module.parameters(recurse=False) if p.requires_grad)


class _Capture:
    """Forward hooks that keep each linear layer's input and, through a tensor hook, the
    gradient at its output.

    A LoRA adapter pair of peft (``lora_A``, ``lora_B`` of one layer, one active adapter) is
    read at its layer instead: from the layer's input x and the gradient g at its output,
    A's gradient is gb' x with gb = s g B, and B's is g' (s xa) with xa = x A' (dropout is
    off: the pass runs in eval mode). Hooks on the adapters themselves would keep the layer
    from running as one fused node (``rmlens.rewards``' fine-tuning fuses it)."""

    def __init__(self, net, linears):
        self.inputs, self.grads, self.handles = {}, {}, []
        self.lora = _lora_layers(net, linears)
        hooked = {parent for parent, _, _ in self.lora.values()}
        for name in hooked:
            self.handles.append(net.get_submodule(name).register_forward_hook(self._hook(name)))
        for name, module in linears:
            if name not in self.lora:
                self.handles.append(module.register_forward_hook(self._hook(name)))

    def _hook(self, name):
        def hook(module, args, output):
            self.inputs[name] = args[0].detach()
            output.register_hook(lambda g: self.grads.__setitem__(name, g.detach()))

        return hook

    def __contains__(self, name: str) -> bool:
        return self.lora.get(name, (name,))[0] in self.grads

    def read(self, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        """The input and the output gradient whose outer products give ``name``'s weight
        gradient."""
        if name not in self.lora:
            return self.inputs[name], self.grads[name]
        parent, role, layer = self.lora[name]
        x, g = self.inputs[parent].float(), self.grads[parent].float()
        adapter = layer.active_adapters[0]
        s = float(layer.scaling[adapter])
        a = layer.lora_A[adapter].weight.detach().float()
        b = layer.lora_B[adapter].weight.detach().float()
        x2, g2 = x.reshape(-1, x.shape[-1]), g.reshape(-1, g.shape[-1])
        # rank-r products as (r, d) x (d, T), transposed: faster on a CPU than (T, d) x (d, r)
        if role == "lora_A":
            return x, (b.t() @ g2.t()).t().mul_(s).view(*g.shape[:-1], -1)
        return (a @ x2.t()).t().mul_(s).view(*x.shape[:-1], -1), g

    def clear(self) -> None:
        self.inputs.clear()
        self.grads.clear()

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def _lora_layers(net: nn.Module, linears) -> dict[str, tuple[str, str, nn.Module]]:
    """Trained ``lora_A``/``lora_B`` linears read at their peft layer: name -> (the layer's
    name, "lora_A" or "lora_B", the layer), where the layer runs one adapter, plainly."""
    names = {name for name, _ in linears}
    found = {}
    for name, _ in linears:
        parent, _, rest = name.rpartition(".lora_")
        role, _, adapter = rest.partition(".")
        if not parent or role not in ("A", "B"):
            continue
        layer = net.get_submodule(parent)
        if (getattr(layer, "active_adapters", None) != [adapter]
                or getattr(layer, "merged", True) or getattr(layer, "disable_adapters", True)
                or adapter in getattr(layer, "lora_variant", {})
                or layer.lora_A[adapter].bias is not None or layer.lora_B[adapter].bias is not None
                or not {f"{parent}.lora_A.{adapter}", f"{parent}.lora_B.{adapter}"} <= names):
            continue  # fmt: skip
        found[name] = (parent, f"lora_{role}", layer)
    return found


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
        bounds = [(a, a + shared + sum(tails)) for a, shared, tails in spans]
        if g.shape[1] > x.shape[1]:  # (in, T) x (T, out) for a rank-r input: a faster GEMM
            w = torch.stack([(x[a:e].t() @ g[a:e]).t() for a, e in bounds]).flatten(1)
        else:
            w = torch.stack([g[a:e].t() @ x[a:e] for a, e in bounds]).flatten(1)
        return torch.cat([w, torch.stack([g[a:e].sum(0) for a, e in bounds])], 1) if bias else w
    if not head:
        owner = _row_examples(batch, x.shape[0]).to(x.device)
        if g.shape[-1] > x.shape[-1]:
            w = torch.bmm(x.transpose(1, 2), g).transpose(1, 2).flatten(1)
        else:
            w = torch.bmm(g.transpose(1, 2), x).flatten(1)
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
    net, examples, rt, *, batches: list[np.ndarray], dim: int | None = None, seed: int = 0,
    advance: Callable[[int], None] | None = None,
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
    advance : callable, optional
        Called with the number of pairs done after each batch (a progress bar).

    Returns
    -------
    rewards : ndarray of shape (n, 2)
        Rewards of chosen and rejected.
    jac : ndarray of shape (n, q), float32
        J, or its sketch (q = ``dim``).
    """
    step = advance or (lambda n: None)
    linears, other = trainable_linears(net)
    if other:  # full fine-tuning: not every trained tensor is a linear layer's
        return _pair_by_pair(net, examples, rt, dim=dim, seed=seed, advance=step)
    total = n_params(linears)
    n = len(examples)
    dim = _sketch_dim(dim, n, total)
    device = next(net.parameters()).device
    sketch = None
    if dim:
        sketch = dict(zip([name for name, _ in linears],
                          count_sketch([_size(m) for _, m in linears], dim, seed, device)))
    out = np.zeros((n, dim or total), dtype=np.float32)
    jac = torch.from_numpy(out)  # written in place, block by block
    rewards = np.zeros((n, 2))
    training = net.training
    net.eval()
    capture = _Capture(net, linears)
    try:
        for index in batches:
            batch = rt.batch(examples, index)
            net.zero_grad(set_to_none=True)
            with torch.enable_grad(), rt.autocast():
                r = net(batch)
                (r[:, 0] - r[:, 1]).sum().backward()
            rewards[np.asarray(index)] = r.detach().float().cpu().numpy()[:, :2]
            rows = torch.as_tensor(np.asarray(index))
            acc = torch.zeros(len(index), dim, device=r.device) if sketch else None
            start = 0
            for name, module in linears:
                size = _size(module)
                if name in capture:  # else a layer the rewards do not read (a pooler): zeros
                    flat = _per_example(*capture.read(name), module, batch, len(index),
                                        head=name == "head")  # fmt: skip
                    if sketch is None:
                        jac[rows, start:start + size] = flat.cpu()
                    else:
                        where, sign = sketch[name]
                        acc.index_add_(1, where, flat * sign)
                start += size
            if sketch is not None:
                jac[rows] = acc.cpu()
            capture.clear()
            step(len(index))
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


def _pair_by_pair(net, examples, rt, *, dim: int | None, seed: int,
                  advance: Callable[[int], None]):
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
            advance(1)
    finally:
        net.train(training)
    return rewards, out
