"""Explicit reward heads on frozen features: r(x, y) = w . h(x, y) + b (or a small MLP)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from rmlens._io import write_atomic, write_json
from rmlens._params import config_dict
from rmlens.rewards._config import HeadConfig
from rmlens.rewards._losses import bradley_terry_loss, centering_loss
from rmlens.rewards._metrics import reward_stats


class RewardHead(nn.Module):
    """Standardize the features, then a linear map or a one-hidden-layer MLP to a scalar."""

    def __init__(self, dim: int, config: HeadConfig):
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("scale", torch.ones(dim))
        self.drop = nn.Dropout(config.dropout)
        if config.head == "linear":
            self.net = nn.Linear(dim, 1)
        else:
            self.net = nn.Sequential(
                nn.Linear(dim, config.hidden_dim), nn.GELU(), nn.Linear(config.hidden_dim, 1)
            )

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        z = (h - self.mean) / self.scale  # (B, d)
        return self.net(self.drop(z)).squeeze(-1)  # (B,)


class HeadRM:
    """Explicit reward model: a head trained with Bradley-Terry on frozen pair features.

    Parameters
    ----------
    config : HeadConfig, optional

    Attributes
    ----------
    head_ : RewardHead
        The trained head.
    history_ : list of dict
        Training metrics per epoch (``loss``, ``accuracy``, ``margin``, ``reward_*``).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> xc, xr = rng.normal(1, 1, (50, 8)), rng.normal(0, 1, (50, 8))
    >>> rm = HeadRM(HeadConfig(epochs=5)).fit(xc, xr)
    >>> rm.score(xc).shape
    (50,)
    """

    def __init__(self, config: HeadConfig | None = None):
        self.config = config or HeadConfig()

    def get_params(self) -> dict:
        return {"config": self.config}

    def fit(self, x_chosen, x_rejected, margin=None) -> HeadRM:
        """Train on (n_pairs, d) chosen and rejected features; ``margin`` is (n_pairs,)."""
        cfg = self.config.check()
        xc = torch.as_tensor(np.asarray(x_chosen), dtype=torch.float32)
        xr = torch.as_tensor(np.asarray(x_rejected), dtype=torch.float32)
        if xc.shape != xr.shape or xc.ndim != 2:
            raise ValueError(f"x_chosen {tuple(xc.shape)} and x_rejected {tuple(xr.shape)} differ")
        m = None
        if cfg.use_margin and margin is not None:
            m = torch.as_tensor(np.nan_to_num(np.asarray(margin, dtype=float)), dtype=torch.float32)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # small matrices: threads cost more than they save
        try:
            with torch.random.fork_rng():
                torch.manual_seed(cfg.seed)
                head = self._train(xc, xr, m)
        finally:
            torch.set_num_threads(threads)
        self.head_ = head.eval()
        self.history_[-1].update(reward_stats(self.score(xc), self.score(xr)))
        return self

    def _train(self, xc: torch.Tensor, xr: torch.Tensor, m: torch.Tensor | None) -> RewardHead:
        cfg = self.config
        head = RewardHead(xc.shape[1], cfg)
        both = torch.cat([xc, xr])
        head.mean.copy_(both.mean(0))
        head.scale.copy_(both.std(0).clamp(min=1e-6))
        opt = torch.optim.AdamW(head.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.history_ = []
        n = len(xc)
        for _ in range(cfg.epochs):
            head.train()
            order = torch.randperm(n)
            total = 0.0
            for start in range(0, n, cfg.batch_size):
                b = order[start : start + cfg.batch_size]
                rc, rr = head(xc[b]), head(xr[b])
                loss = bradley_terry_loss(rc, rr, None if m is None else m[b])
                if cfg.center_coef:
                    loss = loss + cfg.center_coef * centering_loss(rc, rr)
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(b)
            self.history_.append({"loss": total / n})
        return head

    def score(self, x) -> np.ndarray:
        """Rewards (n,) of features (n, d)."""
        if not hasattr(self, "head_"):
            raise RuntimeError("This HeadRM instance is not fitted yet. Call 'fit' first.")
        with torch.inference_mode():
            return self.head_(torch.as_tensor(np.asarray(x), dtype=torch.float32)).numpy()

    def save(self, path: str | Path) -> Path:
        """Write ``head.safetensors`` and ``head_config.json`` into the folder ``path``."""
        path = Path(path)
        state = {k: v.contiguous() for k, v in self.head_.state_dict().items()}
        write_atomic(path / "head.safetensors", lambda tmp: save_file(state, str(tmp)))
        write_json(
            {**config_dict(self.config), "dim": int(self.head_.mean.numel())},
            path / "head_config.json",
        )
        return path

    @classmethod
    def load(cls, path: str | Path) -> HeadRM:
        path = Path(path)
        saved = json.loads((path / "head_config.json").read_text())
        dim = saved.pop("dim")
        rm = cls(HeadConfig.from_dict(saved))
        head = RewardHead(dim, rm.config)
        head.load_state_dict(load_file(str(path / "head.safetensors")))
        rm.head_ = head.eval()
        return rm
