"""rmlens.sae: a sparse-autoencoder lens on the features a frozen audit's RMs read.

- :func:`fit_sae` (``rmlens sae DIR``): a TopK SAE on the audit's response features, or
  one trained elsewhere in sae-lens's format; its pair latents (chosen minus rejected, for
  ``rmlens attribute DIR --features sae``) and a name card per latent. :class:`SAEConfig`
  holds its settings, :class:`SAELens` what it wrote.
- :class:`TopKSAE` (``encode``, ``decode``, ``W_dec``, unit ``directions``) and
  :func:`fit_topk`; :func:`load_sae` / :func:`save_sae` read and write sae-lens's format;
  :func:`audit_sae` and :func:`load_latents` read what ``rmlens sae DIR`` wrote.
- :func:`debias` (``rmlens sae DIR --out DEBIASED_DIR``): shortcut latents
  (:func:`shortcut_latents`) projected out of every run's head (:func:`project_head`), no
  retraining; :class:`DebiasConfig` holds its settings, :class:`Debiased` what it wrote;
  :func:`check_debiasable` refuses an audit it cannot debias before anything is fitted.
"""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_config": ["SAEConfig"],
        "_topk": ["TopKSAE", "fit_topk", "fvu"],
        "_files": ["load_sae", "save_sae"],
        "_lens": ["SAELens", "audit_sae", "fit_sae", "load_latents", "pair_latents"],
        "_cards": ["response_features"],
        "_debias_config": ["DebiasConfig"],
        "_debias": ["Debiased", "check_debiasable", "debias", "project_head", "shortcut_latents"],
        "_debias_dir": ["DEBIAS_OBJECTIVE"],
    },
)
