"""Settings of the SAE lens: light, so the command line builds its options fast."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from rmlens._params import Config, ParamError, non_negative_int, positive, positive_int

# Settings of an SAE trained here: with `sae` (an SAE trained elsewhere) they do not apply.
TRAINING_FIELDS = ("n_latents", "k", "epochs", "lr", "batch_size", "standardize")


@dataclass
class SAEConfig(Config):
    """A sparse autoencoder on the response features of a frozen audit, and its name cards.

    The training settings (``n_latents``, ``k``, ``epochs``, ``lr``, ``batch_size``,
    ``standardize``) apply to an SAE trained here; with ``sae`` (an SAE trained elsewhere)
    they stay at their defaults.
    """

    n_latents: int = field(
        default=512, metadata={"help": "Latents of the SAE trained here (its dictionary size)."}
    )
    k: int = field(default=16, metadata={"help": "Latents kept active per response (TopK)."})
    epochs: int = field(default=100, metadata={"help": "Passes over the training responses."})
    lr: float = field(default=1e-3, metadata={"help": "Adam's step size."})
    batch_size: int = field(default=256, metadata={"help": "Responses per training step."})
    standardize: bool = field(
        default=True,
        metadata={"help": "Fit on each feature standardized over the responses (mean 0, std "
                          "1), as the audit's heads read them; the saved SAE reads raw "
                          "features all the same (the standardization is folded into it)."},
    )
    heldout_fraction: float = field(
        default=0.1,
        metadata={"help": "Share of the unique responses held out of training; the FVU "
                          "(fraction of variance unexplained) is measured on them."},
    )
    seed: int = field(default=0, metadata={"help": "Seed of the held-out split, init, order."})
    sae: str | None = field(
        default=None,
        metadata={"help": "A folder holding an SAE trained elsewhere, in sae-lens's format "
                          "(cfg.json and sae_weights.safetensors), to use instead of training "
                          "one; it must read vectors of the backbone's hidden size.",
                  "unset": "train one on the audit's responses"},
    )
    top_responses: int = field(
        default=5, metadata={"help": "Top-activating responses shown on each name card."}
    )

    _constraints = {
        "n_latents": (lambda x: positive_int(x) and x >= 2, "an int >= 2"),
        "k": (positive_int, "an int > 0"),
        "epochs": (positive_int, "an int > 0"),
        "lr": (positive, "a float > 0"),
        "batch_size": (positive_int, "an int > 0"),
        "standardize": (True, False),
        "heldout_fraction": (lambda x: isinstance(x, (int, float)) and not isinstance(x, bool)
                             and 0 < x < 1, "a float in (0, 1)"),
        "seed": (non_negative_int, "an int >= 0"),
        "sae": (lambda x: x is None or (isinstance(x, str) and x.strip() != ""),
                "a folder path or None"),
        "top_responses": (positive_int, "an int > 0"),
    }

    def _check_more(self) -> None:
        if self.k > self.n_latents:
            raise ParamError("k", type(self).__name__, f"at most n_latents ({self.n_latents})",
                             self.k)
        if self.sae is not None:
            defaults = {f.name: f.default for f in fields(self)}
            for name in TRAINING_FIELDS:
                if getattr(self, name) != defaults[name]:
                    raise ParamError(
                        name, type(self).__name__, "left at its default with `sae` (it sets "
                        "how an SAE is trained here; the one given is trained already)",
                        getattr(self, name),
                    )
