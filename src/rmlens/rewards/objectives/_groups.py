"""Group DRO: the worst group's loss."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import torch

from rmlens.rewards.objectives._base import DRO_ROUNDS, INACTIVE_DRO, Objective


class GroupDRO(Objective):
    """sum_g q_g BT_g(d), BT_g the mean loss of group g's pairs in the batch, with q moved
    toward the worst group by exponentiated gradient (Sagawa et al. 2020, Algorithm 1);
    early stopping watches the worst group's validation loss."""

    name = "group_dro"
    help = "worst-group loss over --dro-groups"
    fields = ("dro_groups", "dro_step")
    group_column = "required"

    @staticmethod
    def step(q: torch.Tensor, group_loss: torch.Tensor, present, step: float) -> torch.Tensor:
        """One exponentiated-gradient step on the group weights: q_g <- q_g exp(step * L_g)
        for the groups in the batch, then q / sum(q).

        Parameters
        ----------
        q : torch.Tensor of shape (G,)
            The group weights.
        group_loss : torch.Tensor of shape (G,)
            Each group's mean loss in the batch.
        present : torch.Tensor of shape (G,), bool
            The groups in the batch.
        step : float
            The step size.

        Returns
        -------
        torch.Tensor of shape (G,)
        """
        import torch

        q = q.clone()
        q[present] = q[present] * torch.exp(step * group_loss[present])
        return q / q.sum()

    def words(self, config) -> str:
        groups = config.dro_groups or "user_id"
        step = "default" if config.dro_step is None else f"{config.dro_step:g}"
        return f"; objective group_dro over '{groups}' (step {step})"

    def setup(self, m, train, seed, weights):
        import torch

        if train.group is None:
            raise ValueError("objective 'group_dro' needs the group of every pair")
        n_groups = int(train.group.max()) + 1 if len(train.group) else 1
        m.register_buffer("q", torch.full((n_groups,), 1.0 / n_groups))

    def reduce(self, m, loss, extras, weight):
        import torch

        group_loss, present = self._group_losses(m, loss, extras.group)
        if m.training:
            with torch.no_grad():
                m.q.copy_(self.step(m.q, group_loss.detach(), present, m.dro_step))
        q = m.q * present
        return (q * group_loss).sum() / q.sum()

    @staticmethod
    def _group_losses(m, loss, group):
        import torch

        n = len(m.q)
        inside = group < n  # validation groups unseen in training carry no weight
        total = loss.new_zeros(n).index_add(0, group[inside], loss[inside])
        count = loss.new_zeros(n).index_add(0, group[inside], torch.ones_like(loss[inside]))
        return total / count.clamp(min=1), count > 0

    def validation_loss(self, m, loss, extras):
        import torch

        codes = torch.unique(extras.group, return_inverse=True)[1]
        total = loss.new_zeros(int(codes.max()) + 1).index_add(0, codes, loss)
        count = torch.bincount(codes).to(loss.dtype)
        return float((total / count).max())

    def convex_fit(self, m, codes):
        # DRO_ROUNDS exponentiated-gradient steps on the group weights, with whole solves
        # for the SGD steps of Sagawa et al. 2020, Algorithm 1:
        #     q_g <- q_g exp(step L_g(w)) / sum_h q_h exp(step L_h(w)),
        # w(q) = argmin_w sum_g q_g (n / n_g) sum_{j in g} loss_j(w) + lambda/2 ||w||^2 solved
        # to its optimum (pair weights c_j = n q_g / n_g, mean 1 at uniform q), ending with w
        # solved under the last q (problem.c); q starts where the last lambda left it.
        import numpy as np
        import torch
        from scipy.special import log_expit

        # lazy: scipy loads only when this runs (the command line imports this module)
        from rmlens.influence import fit_logistic

        counts = np.bincount(codes, minlength=len(m.q)).astype(float)
        step = m.dro_step

        def fit(problem, lam: float, w0, tol: float) -> np.ndarray:
            q = m.q.double().numpy()
            w = w0
            for round_ in range(DRO_ROUNDS + 1):
                problem.c = len(codes) * q[codes] / counts[codes]
                w = fit_logistic(problem, lam, w0=w, tol=tol)
                if round_ == DRO_ROUNDS:
                    break
                e = problem.z @ w + problem.o
                loss = -(problem.t * log_expit(e) + (1 - problem.t) * log_expit(-e))
                total = np.bincount(codes, weights=loss, minlength=len(q))
                group_loss = total / np.maximum(counts, 1)
                q = q * np.exp(step * group_loss)
                q = q / q.sum()
            m.q.copy_(torch.as_tensor(q, dtype=m.q.dtype))
            return w

        return fit

    def snapshot(self, m):
        return m.q.clone()

    def restore(self, m, state):
        m.q.copy_(state)

    def inactive_why(self, m, config, extras):
        q = m.q.double().numpy()
        if len(q) < 2 or q.max() * len(q) < INACTIVE_DRO:
            return (f"the group weights stayed uniform (largest {q.max():.3f} against "
                    f"{1 / len(q):.3f}, {len(q)} groups)")  # fmt: skip
        return None

    def _state_record(self, m):
        return {"dro_q": m.q.cpu().tolist(), "dro_q_max": float(m.q.max())}
