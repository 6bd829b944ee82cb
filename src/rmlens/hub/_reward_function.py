"""An RM as the reward function of an RL trainer (TRL's GRPO ``reward_funcs``).

TRL's GRPO scores a reward *model* given by path its own way: plain-string prompts become
``prompt + completion`` with no chat template and no EOS, conversations get the
tokenizer's chat template, nothing is cut to the model's length, and ``bf16=True`` (its
default) scores in bfloat16. An RM trained by rmlens on chat-formatted text, on raw text
with EOS, or on HH transcripts split into turns reads something else there. A *function*
in ``reward_funcs`` receives the prompts and completions as they are, so
:func:`reward_function` wraps any RM ``load_rm`` reads and formats each (prompt,
completion) exactly as the RM was trained (``rmlens.backbones._tokenize.encode_pair``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rmlens._errors import InputError
from rmlens.rewards import resolve_device

DTYPES = ("float32", "bfloat16", "float16")


class RewardFunction:
    """A callable in the shape of TRL's GRPO ``reward_funcs``:
    ``f(prompts, completions, **kwargs) -> list[float]``.

    Parameters
    ----------
    rm : RewardModel
        What scores: any RM ``load_rm`` returns.
    name : str, default="rmlens_rm"
        ``__name__``: what TRL logs the reward under (``rewards/<name>/mean``).

    Notes
    -----
    Prompts and completions are strings (TRL's standard format) or message lists (its
    conversational format: a completion is ``[{"role": "assistant", "content": ...}]``).
    Extra keyword arguments (the dataset's other columns, ``completion_ids``,
    ``trainer_state``) are accepted and ignored.
    """

    def __init__(self, rm: Any, *, name: str = "rmlens_rm") -> None:
        self.rm = rm
        self.__name__ = name

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any],
                 **kwargs: Any) -> list[float]:  # fmt: skip
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
        responses = [_completion(c, self.rm.format) for c in completions]
        return [float(r) for r in self.rm.score(list(prompts), responses)]


def _completion(completion: Any, fmt: str | None) -> Any:
    """A completion as the RM's format takes it: messages stay messages under the chat
    template; in raw text, a one-message completion is its content (TRL's text path)."""
    if isinstance(completion, list) and fmt != "chat":
        return "".join(str(m.get("content", "")) for m in completion)
    return completion


def reward_function(
    rm: str | Path | Any,
    *,
    dtype: str = "float32",
    device: str = "auto",
    batch_size: int = 16,
    format: str = "auto",
    name: str = "rmlens_rm",
) -> RewardFunction:
    """An RM as a reward function for RL trainers, formatting as the RM was trained.

    Parameters
    ----------
    rm : str, Path or RewardModel
        An RM folder (rmlens's or exported by ``rmlens export``), an RM preset, an
        experiment directory (its runs as an ensemble: the mean reward), a sequence
        classifier's folder or hub id, or a loaded RM.
    dtype : {"float32", "bfloat16", "float16"}, default="float32"
        Precision of a sequence classifier's forward pass. bfloat16 moves rewards
        (``docs/guide/elsewhere.rst`` gives the drift measured); rmlens RMs score in float32.
    device : str, default="auto"
        Torch device (``auto``: cuda if available, else mps, else cpu).
    batch_size : int, default=16
        Sequences per forward pass.
    format : {"auto", "chat", "raw", "pair"}, default="auto"
        Override the format the RM records (``auto``: the recorded one).
    name : str, default="rmlens_rm"
        The function's ``__name__``, which TRL logs the reward under.

    Returns
    -------
    RewardFunction
        ``f(prompts, completions, **kwargs) -> list[float]``.

    Raises
    ------
    InputError
        For an RM ``load_rm`` refuses, or ``dtype`` other than float32 for an RM that is
        not a sequence classifier.

    Examples
    --------
    >>> from trl import GRPOConfig, GRPOTrainer                   # doctest: +SKIP
    >>> reward = reward_function("rm-hf/")                        # doctest: +SKIP
    >>> trainer = GRPOTrainer(model="policy/", reward_funcs=reward,
    ...                       args=GRPOConfig(...), train_dataset=prompts)  # doctest: +SKIP
    """
    # lazy: torch, transformers, scipy load only when this runs
    from rmlens.hub._classifier import SequenceClassifierRM
    from rmlens.hub._formatting import use_format
    from rmlens.hub._load import load_rm

    if dtype not in DTYPES:
        raise InputError(f"`dtype` must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if isinstance(rm, (str, Path)):
        rm = load_rm(rm, device=device)
    use_format(rm, format)
    if isinstance(rm, SequenceClassifierRM):
        import torch

        rm.model.to(device=resolve_device(device), dtype=getattr(torch, dtype))
        rm.batch_size = batch_size
    elif dtype != "float32":
        raise InputError(f"`dtype` {dtype}: a {type(rm).__name__} scores in float32; export it "
                         "(rmlens export) to score a sequence classifier in another precision")
    elif hasattr(rm, "batch_size"):
        rm.batch_size = batch_size
    return RewardFunction(rm, name=name)
