"""The paired counterfactuals: how a run's RM would score each pair had a group of pairs been
removed from (or added to) its training, without training it again (DESIGN.md section 3).

One page per estimator, its equations in the docstring:

- ``_newton``: the convex head (L2-penalized linear Bradley-Terry on frozen features), its
  logistic problem (:class:`LogisticProblem`, :func:`fit_logistic`) and the group
  counterfactuals as Newton steps from its optimum (:func:`counterfactuals`, checked by
  exact refits, :func:`refit`);
- ``_last_layer``: last-layer influence, the Newton step of an RM's last linear layer on
  its input differences over a damping grid (:func:`last_layer_counterfactuals`,
  ``DAMPING``);
- ``_gauss_newton``: Gauss-Newton influence through every trained parameter, in pair space
  (:func:`gauss_newton_counterfactuals`);
- ``_pair_gradients``: the per-pair gradients it needs, in one batched backward pass
  (:func:`pair_gradients`), through every trained tensor or those of the last blocks
  (:func:`through_last`).

Arrays and a torch network in, counterfactuals out: this package imports no other rmlens
package, and the trainers of ``rmlens.rewards`` call it in every audit run.
"""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_newton": [
            "EXPERT_PENALTY", "PATH_TOLERANCE", "REFINE_SHARE", "LogisticProblem",
            "counterfactuals", "fit_logistic", "one_blas_thread", "refit",
        ],
        "_last_layer": ["DAMPING", "last_layer_counterfactuals"],
        "_gauss_newton": ["gauss_newton_counterfactuals"],
        "_pair_gradients": ["pair_gradients", "reading_last", "through_last"],
    },
)
