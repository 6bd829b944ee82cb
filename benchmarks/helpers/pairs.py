"""The shared HH-RLHF pairs, and the shortest of them that fit a backbone's length.

``shortest`` picks the pairs most CPU benchmarks train on (``finetune_defaults.py``,
``finetune_paired.py``, ``transfer.py``, ``precision.py``, the findings).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rmlens.backbones import load_backbone
from rmlens.backbones._tokenize import encode_pair

HH = Path(__file__).resolve().parents[3] / "shared/data/hh-rlhf-harmless-base-test.jsonl.gz"


def shortest(pairs, model: str, n: int, max_length: int):
    """The ``n`` pairs with the shortest longer side, all within ``max_length`` tokens."""
    bb = load_backbone(model)
    longest = []
    for p, c, r in zip(pairs.prompt, pairs.chosen, pairs.rejected):
        longest.append(max(encode_pair(bb.tokenizer, p, c, 1 << 30, format=bb.format)[1],
                           encode_pair(bb.tokenizer, p, r, 1 << 30, format=bb.format)[1]))
    order = np.argsort(longest, kind="stable")
    keep = [i for i in order if longest[i] <= max_length][:n]
    return pairs.iloc[keep].reset_index(drop=True)
