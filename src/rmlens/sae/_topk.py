"""The sparse autoencoder: a TopK SAE (Gao et al. 2024, "Scaling and evaluating sparse
autoencoders", arXiv 2406.04093), its fit, and its reconstruction figures.

Written here in plain torch rather than taken from sae-lens: sae-lens 6.54 requires
transformer-lens (plus datasets, plotly, nltk, ...), and its ``SAE`` class is a
transformer-lens ``HookedRootModule`` built to hook a language model's residual stream,
while rmlens fits pooled vectors it already holds (one per response). Its on-disk format is
kept (``_files``), so an SAE trained with sae-lens loads here and ours loads there.

    pre   = W_enc^T (h - b_dec) + b_enc        (n_latents,)
    z     = ReLU(TopK(pre))                     k nonzero at most (sae-lens and Gao's code)
    h_hat = W_dec^T z + b_dec                   (d,)

with the rows of W_dec (the decoder directions) kept at unit norm during training. A
ReLU SAE (sae-lens ``standard``) and a JumpReLU SAE load too: same map, another activation.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rmlens.progress import progress_bar

ACTIVATIONS = ("topk", "relu", "jumprelu")
AUX_COEF = 1 / 32  # Gao et al. 2024, A.2: weight of the AuxK loss
EPS = 6.25e-10  # Adam's epsilon in Gao et al. 2024 (A.1)
SCALE_FLOOR = 1e-6  # least standard deviation a feature is divided by (as the heads do)


class TopKSAE(nn.Module):
    """A sparse autoencoder on vectors of size ``d``: encode, decode, decoder directions.

    Parameters
    ----------
    d : int
        Size of the vectors it reads (the backbone's hidden size).
    n_latents : int
        Number of latents.
    k : int or None
        Latents kept per vector (``activation="topk"``).
    activation : {"topk", "relu", "jumprelu"}, default="topk"
        ``relu`` and ``jumprelu`` (with ``threshold``) only for SAEs trained elsewhere.
    subtract_b_dec : bool, default=True
        Subtract ``b_dec`` from the input before encoding (sae-lens ``apply_b_dec_to_input``).

    Attributes
    ----------
    W_enc : Parameter of shape (d, n_latents)
    b_enc : Parameter of shape (n_latents,)
    W_dec : Parameter of shape (n_latents, d)
        Row j is latent j's decoder direction (unit norm for an SAE trained here on the
        features as given; see :attr:`directions` for unit rows always).
    b_dec : Parameter of shape (d,)
    threshold : Tensor of shape (n_latents,)
        JumpReLU thresholds (zeros otherwise).
    """

    def __init__(self, d: int, n_latents: int, k: int | None = None, *,
                 activation: str = "topk", subtract_b_dec: bool = True):  # fmt: skip
        super().__init__()
        assert activation in ACTIVATIONS, activation
        assert activation != "topk" or (k is not None and 0 < k <= n_latents), (k, n_latents)
        self.d, self.n_latents, self.k = d, n_latents, k
        self.activation, self.subtract_b_dec = activation, subtract_b_dec
        self.W_enc = nn.Parameter(torch.zeros(d, n_latents))
        self.b_enc = nn.Parameter(torch.zeros(n_latents))
        self.W_dec = nn.Parameter(torch.zeros(n_latents, d))
        self.b_dec = nn.Parameter(torch.zeros(d))
        self.register_buffer("threshold", torch.zeros(n_latents))

    def pre(self, h: torch.Tensor) -> torch.Tensor:
        """Pre-activations W_enc^T (h - b_dec) + b_enc.

        Parameters
        ----------
        h : Tensor of shape (B, d)

        Returns
        -------
        Tensor of shape (B, n_latents)
        """
        x = h - self.b_dec if self.subtract_b_dec else h
        return x @ self.W_enc + self.b_enc

    def activate(self, pre: torch.Tensor) -> torch.Tensor:
        """Latent activations from pre-activations: ReLU of the k largest (``topk``), ReLU
        (``relu``), or the values above their threshold (``jumprelu``).

        Parameters
        ----------
        pre : Tensor of shape (B, n_latents)

        Returns
        -------
        Tensor of shape (B, n_latents)
        """
        if self.activation == "relu":
            return pre.relu()
        if self.activation == "jumprelu":
            return pre.relu() * (pre > self.threshold)
        values, index = pre.topk(self.k, dim=-1)  # (B, k)
        return torch.zeros_like(pre).scatter(-1, index, values.relu())

    def encode(self, h: torch.Tensor) -> torch.Tensor:
        """Latent activations z of vectors h.

        Parameters
        ----------
        h : Tensor of shape (B, d)

        Returns
        -------
        Tensor of shape (B, n_latents)
            At most ``k`` nonzero per row (``topk``), all >= 0.
        """
        return self.activate(self.pre(h))

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Reconstructions h_hat = W_dec^T z + b_dec of latent activations z.

        Parameters
        ----------
        z : Tensor of shape (B, n_latents)

        Returns
        -------
        Tensor of shape (B, d)
        """
        return z @ self.W_dec + self.b_dec

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """Reconstructions of vectors h: ``decode(encode(h))``.

        Parameters
        ----------
        h : Tensor of shape (B, d)

        Returns
        -------
        Tensor of shape (B, d)
        """
        return self.decode(self.encode(h))

    @property
    def directions(self) -> np.ndarray:
        """Unit decoder directions: where latent j moves h.

        Returns
        -------
        ndarray of shape (n_latents, d), float64
            The rows of ``W_dec`` scaled to unit norm.
        """
        w = self.W_dec.detach().double().numpy()
        return w / np.maximum(np.linalg.norm(w, axis=1, keepdims=True), 1e-12)

    @torch.inference_mode()
    def codes(self, x, batch_size: int = 4096) -> np.ndarray:
        """Latent activations of vectors, in batches, as numpy.

        Parameters
        ----------
        x : array-like of shape (n, d)
        batch_size : int, default=4096

        Returns
        -------
        ndarray of shape (n, n_latents), float32
        """
        return _batched(self.encode, x, batch_size, self.n_latents)

    @torch.inference_mode()
    def reconstruct(self, x, batch_size: int = 4096) -> np.ndarray:
        """Reconstructions of vectors, in batches, as numpy.

        Parameters
        ----------
        x : array-like of shape (n, d)
        batch_size : int, default=4096

        Returns
        -------
        ndarray of shape (n, d), float32
        """
        return _batched(self, x, batch_size, self.d)


def _batched(fn, x, batch_size: int, width: int) -> np.ndarray:
    """``fn`` over the rows of ``x`` in batches, as one float32 array (n, width)."""
    x = torch.as_tensor(np.asarray(x, dtype=np.float32))
    out = [fn(x[i : i + batch_size]) for i in range(0, len(x), batch_size)]
    return torch.cat(out).numpy() if out else np.zeros((0, width), np.float32)


def fvu(x, x_hat) -> float:
    """Fraction of variance unexplained: sum ||x - x_hat||^2 / sum ||x - mean(x)||^2.

    Parameters
    ----------
    x, x_hat : array-like of shape (n, d)
        Vectors and their reconstructions.

    Returns
    -------
    float
        0 is a perfect reconstruction, 1 no better than the mean vector; NaN for fewer than
        two vectors or constant ones.

    Examples
    --------
    >>> fvu([[0.0], [2.0]], [[1.0], [1.0]])  # the mean: nothing explained
    1.0
    """
    x, x_hat = np.asarray(x, dtype=float), np.asarray(x_hat, dtype=float)
    total = ((x - x.mean(0)) ** 2).sum()
    return float(((x - x_hat) ** 2).sum() / total) if len(x) > 1 and total > 0 else float("nan")


def destandardized(sae: TopKSAE, mean, scale) -> TopKSAE:
    """The same SAE on raw vectors h, for one fit on s = (h - mean) / scale.

        pre   = W_enc^T (s - b_dec) + b_enc = (W_enc / scale)^T (h - (mean + scale b_dec)) + b_enc
        h_hat = mean + scale (W_dec^T z + b_dec) = (W_dec scale)^T z + (mean + scale b_dec)

    Same latents, same TopK choice; the decoder rows are no longer unit norm (their
    direction in raw space is ``W_dec * scale``). A feature constant over the fit
    (``scale`` at the floor ``SCALE_FLOOR``) gets encoder weights 0, not / 1e-6: the SAE
    learned nothing from it, and a new value there must not swamp the latents.
    """
    mean = torch.as_tensor(np.asarray(mean, dtype=np.float32))
    scale = torch.as_tensor(np.asarray(scale, dtype=np.float32))
    out = TopKSAE(sae.d, sae.n_latents, sae.k, activation=sae.activation)
    read = (scale > SCALE_FLOOR).float()  # (d,)
    with torch.no_grad():
        out.W_enc.copy_(sae.W_enc * (read / scale)[:, None])
        out.b_enc.copy_(sae.b_enc)
        out.W_dec.copy_(sae.W_dec * scale[None, :])
        out.b_dec.copy_(mean + scale * sae.b_dec)
        out.threshold.copy_(sae.threshold)
    return out.eval()


def _unit_rows(w: torch.Tensor) -> None:
    w.div_(w.norm(dim=1, keepdim=True).clamp(min=1e-12))


def fit_topk(
    x, *, n_latents: int, k: int, epochs: int, lr: float, batch_size: int, seed: int,
    quiet: bool = True,
) -> tuple[TopKSAE, list[float]]:  # fmt: skip
    """Train a TopK SAE on vectors ``x`` (n, d) by Adam on the normalized MSE.

    Following Gao et al. 2024: decoder rows initialized as random unit vectors and the
    encoder as their transpose, ``b_dec`` as the data mean; after each step the decoder rows
    are set back to unit norm (and the gradient's part along each row removed before it);
    an AuxK loss lets the ``d/2`` most active dead latents (none fired for an epoch)
    reconstruct the residual, weighted 1/32, so fewer latents die.

    Parameters
    ----------
    x : array-like of shape (n, d)
    n_latents, k : int
        Latents, and latents kept per vector.
    epochs, lr, batch_size, seed : int, float, int, int
        Passes over ``x``, Adam's step size, vectors per step, seed of init and order.
    quiet : bool, default=True
        No progress bar.

    Returns
    -------
    sae : TopKSAE
        In eval mode.
    history : list of float
        Mean normalized MSE (training FVU) per epoch.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> sae, history = fit_topk(rng.normal(size=(200, 8)), n_latents=16, k=2, epochs=5,
    ...                         lr=1e-3, batch_size=50, seed=0)
    >>> int((sae.codes(rng.normal(size=(3, 8))) != 0).sum(1).max()) <= 2
    True
    """
    gen = torch.Generator().manual_seed(seed)
    x = torch.as_tensor(np.asarray(x, dtype=np.float32))
    n, d = x.shape
    sae = TopKSAE(d, n_latents, k)
    with torch.no_grad():
        sae.W_dec.copy_(torch.randn(n_latents, d, generator=gen))
        _unit_rows(sae.W_dec)
        sae.W_enc.copy_(sae.W_dec.T)
        sae.b_dec.copy_(x.mean(0))
    variance = ((x - x.mean(0)) ** 2).sum(1).mean().clamp(min=1e-12)  # MSE of the mean
    opt = torch.optim.Adam(sae.parameters(), lr=lr, eps=EPS)
    k_aux = max(1, min(d // 2, n_latents))
    history: list[float] = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small matrices: threads cost more than they save
    try:
        _train(sae, x, opt, variance, k_aux, epochs, batch_size, gen, history, quiet)
    finally:
        torch.set_num_threads(threads)
    return sae.eval(), history


def _train(sae: TopKSAE, x: torch.Tensor, opt, variance, k_aux: int, epochs: int,
           batch_size: int, gen: torch.Generator, history: list[float], quiet: bool) -> None:
    """The epochs of :func:`fit_topk` (appends each epoch's mean loss to ``history``)."""
    n = len(x)
    idle = torch.zeros(sae.n_latents)  # vectors seen since each latent last fired
    with progress_bar("training the SAE", total=epochs, quiet=quiet) as advance:
        for _ in range(epochs):
            order, total = torch.randperm(n, generator=gen), 0.0
            for start in range(0, n, batch_size):
                xb = x[order[start : start + batch_size]]  # (B, d)
                pre = sae.pre(xb)  # (B, n_latents)
                z = sae.activate(pre)
                err = xb - sae.decode(z)  # (B, d)
                loss = err.pow(2).sum(1).mean() / variance  # normalized MSE
                dead = idle > n
                if dead.any():  # AuxK: dead latents reconstruct the residual
                    aux = _aux_reconstruction(sae, pre, dead, min(k_aux, int(dead.sum())))
                    loss = loss + AUX_COEF * (err.detach() - aux).pow(2).sum(1).mean() / variance
                opt.zero_grad()
                loss.backward()
                with torch.no_grad():  # no gradient along the rows: their norm stays 1
                    w, g = sae.W_dec, sae.W_dec.grad
                    g.sub_((g * w).sum(1, keepdim=True) * w)
                opt.step()
                with torch.no_grad():
                    _unit_rows(sae.W_dec)
                idle += len(xb)
                idle[(z > 0).any(0)] = 0
                total += float(loss.detach()) * len(xb)
            history.append(total / n)
            advance(1)


def _aux_reconstruction(sae: TopKSAE, pre: torch.Tensor, dead: torch.Tensor, k: int):
    """W_dec^T z_aux: the ``k`` dead latents with the largest pre-activations, (B, d)."""
    values, index = pre.masked_fill(~dead, float("-inf")).topk(k, dim=-1)
    z = torch.zeros_like(pre).scatter(-1, index, values.relu())
    return z @ sae.W_dec
