"""Explicit vs implicit generalization: rewrites, persona task, splits, metrics, end to end."""

import json

import numpy as np
import pandas as pd
import pytest

from rmlens._errors import InputError
from rmlens.generalization import (
    SHIFT_TOKENS,
    TRAIN_TOKENS,
    GeneralizeConfig,
    persona_splits,
    rewrite_pairs,
    swap_synonyms,
    synonym_table,
)
from rmlens.generalization._generalize import build_splits, split_metrics
from rmlens.generalization._shifts import (
    change_casing,
    change_punctuation,
    change_whitespace,
    parse_shifts,
)

PROMPTS = [
    "what is the best thing ever ?",
    "how can i help the dog ?",
    "why is the sun big ?",
    "who is the cat ?",
    "where is the water ?",
    "can you help ?",
    "what is the moon ?",
    "is the food good ?",
]
PAIRS = pd.DataFrame(
    {
        "id": [f"p{i}" for i in range(16)],
        "prompt": PROMPTS * 2,
        "chosen": [
            "yes , the sun is great .",
            "sure , give the dog water .",
            "the sun is big .",
            "the cat is good .",
            "here is the water .",
            "sure , i can help .",
            "the moon is big .",
            "yes , the food is good .",
        ]
        * 2,
        "rejected": [
            "no",
            "never",
            "i hate the sun",
            "the cat is bad",
            "no water",
            "nope",
            "not really",
            "the food is bad",
        ]
        * 2,
        "domain": ["sky", "pets", "sky", "pets", "home", "home", "sky", "home"] * 2,
    }
)


def test_synonym_table_ships_with_rmlens():
    table = synonym_table()
    assert len(table) > 150
    assert all(k == k.lower() and v != k for k, v in table.items())
    assert swap_synonyms("A big dog is VERY quick.") == "A large dog is REALLY fast."
    assert swap_synonyms("Big.") == "Large."


def test_builtin_rewrites():
    assert change_casing("Yes, Sure.") == "yes, sure."
    assert change_casing("yes. sure") == "Yes. Sure"
    assert change_punctuation("Yes!") == "Yes"
    assert change_punctuation("Yes") == "Yes."
    assert change_whitespace("a b c") == "a  b  c\n"
    pairs = pd.DataFrame(
        {"prompt": ["q", "q"], "chosen": ["a big dog", "zzz"], "rejected": ["no", "qqq"]}
    )
    shifted = rewrite_pairs(pairs, "synonyms")
    assert shifted.chosen.tolist() == ["a large dog"]  # the unchanged pair is left out
    with pytest.raises(InputError, match="unknown rewrite 'leet'"):
        parse_shifts("casing,leet")


def test_persona_task_tokens_and_labels():
    splits = persona_splits(100, test_fraction=0.2, seed=1)
    assert set(splits) == {"train", "in_distribution", "token_shift", "token_shift:train_prompts"}
    train_words = set(TRAIN_TOKENS[0] + TRAIN_TOKENS[1])
    shift_words = set(SHIFT_TOKENS[0] + SHIFT_TOKENS[1])
    for name, frame in splits.items():
        words = set(frame.chosen) | set(frame.rejected)
        assert words <= (shift_words if "token_shift" in name else train_words), name
        agree_chosen = frame.chosen.isin(TRAIN_TOKENS[0] + SHIFT_TOKENS[0])
        assert (agree_chosen == frame.agree).all()
    assert len(splits["train"]) == 80 and len(splits["in_distribution"]) == 20 * 4
    assert not set(splits["train"].statement) & set(splits["in_distribution"].statement)
    assert set(splits["token_shift"].statement) == set(splits["in_distribution"].statement)
    assert splits["train"].agree.mean() == pytest.approx(0.5, abs=0.1)


def test_splits_with_domain_shift_and_rewrites():
    config = GeneralizeConfig(domain_col="domain", train_domains="sky,pets", test_fraction=0.3)
    splits = build_splits(PAIRS, config)
    assert set(splits["domain_shift"].domain) == {"home"}
    assert set(splits["train"].domain) | set(splits["in_distribution"].domain) <= {"sky", "pets"}
    assert not set(splits["train"].prompt) & set(splits["in_distribution"].prompt)
    casing = splits["token_shift:casing"]  # lowercase text gets capitalised
    assert casing.chosen.str[0].str.isupper().all()
    assert casing.id.tolist() == splits["in_distribution"].id.tolist()
    assert {"token_shift:punctuation", "token_shift:whitespace", "token_shift:synonyms"} <= set(
        splits
    )
    with pytest.raises(InputError, match="'space' is not a value of 'domain'"):
        build_splits(PAIRS, GeneralizeConfig(domain_col="domain", train_domains="space"))
    with pytest.raises(InputError, match="no column 'topic'"):
        build_splits(PAIRS, GeneralizeConfig(domain_col="topic", train_domains="sky"))


def test_split_metrics_by_hand():
    m = split_metrics(np.array([1.0, 2.0, 0.0]), np.array([0.0, 2.0, 1.0]), scale=2.0)
    assert m["accuracy"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert m["norm_margin"] == pytest.approx((1 + 0 + 1) / 3 / 2)
    assert m["n"] == 3


def test_generalize_end_to_end(tiny_causal_dir, tmp_path, capsys):
    from rmlens.cli import main
    from rmlens.data import save_pairs

    save_pairs(PAIRS, tmp_path / "pairs.jsonl")
    shifted = PAIRS.iloc[:4].assign(chosen=lambda d: d.chosen.str.replace("good", "great"))
    save_pairs(shifted, tmp_path / "shifted.jsonl")
    out = tmp_path / "gen"
    args = [
        "generalize",
        "--data",
        str(tmp_path / "pairs.jsonl"),
        "--out",
        str(out),
        "--shift-data",
        str(tmp_path / "shifted.jsonl"),
        "--model",
        str(tiny_causal_dir),
        "--domain-col",
        "domain",
        "--train-domains",
        "sky,pets",
        "--epochs",
        "1",
        "--max-length",
        "40",
        "--batch-size",
        "4",
        "--device",
        "cpu",
        "-q",
        "--json",
    ]
    assert main(args) == 0
    rows = json.loads(capsys.readouterr().out)  # --json: the table's records, alone on stdout
    table = pd.read_parquet(out / "generalization.parquet")
    assert list(table.columns) == ["rm", "split", "accuracy", "norm_margin", "n"]
    assert set(table.rm) == {"explicit", "implicit"}
    assert {
        "train",
        "in_distribution",
        "domain_shift",
        "token_shift:file",
        "token_shift:whitespace",
    } <= set(table.split)
    assert table.accuracy.between(0, 1).all() and (table.norm_margin >= 0).all()
    assert len(rows) == len(table)
    for name in (
        "generalization.png",
        "scores.parquet",
        "config.json",
        "rms/explicit/rm_config.json",
        "rms/implicit/adapter/adapter_model.safetensors",
    ):
        assert (out / name).exists(), name
    scores = pd.read_parquet(out / "scores.parquet")
    im = scores[(scores.rm == "implicit") & (scores.split == "train")]
    from rmlens.hub import load_rm

    rm = load_rm(out / "rms" / "implicit", device="cpu")
    train = PAIRS.set_index("id").loc[im.id].reset_index()
    np.testing.assert_allclose(rm.score_pairs(train)[0], im.r_chosen, atol=1e-5)
    assert main(args) == 0  # finished RMs are reused: same table
    again = pd.read_parquet(out / "generalization.parquet")
    pd.testing.assert_frame_equal(again, table, atol=1e-6)
    assert main(args[:-4] + ["--epochs", "2", "--device", "cpu", "-q"]) == 2
    assert "another configuration" in capsys.readouterr().err


def test_generalize_needs_data_or_task_and_a_causal_lm(tiny_encoder_dir, tmp_path, capsys):
    from rmlens.cli import main
    from rmlens.data import save_pairs

    assert main(["generalize", "--out", str(tmp_path / "x")]) == 2
    assert "--task persona" in capsys.readouterr().err
    save_pairs(PAIRS, tmp_path / "pairs.jsonl")
    code = main(
        [
            "generalize",
            "--data",
            str(tmp_path / "pairs.jsonl"),
            "--out",
            str(tmp_path / "y"),
            "--model",
            str(tiny_encoder_dir),
            "--epochs",
            "1",
            "--max-length",
            "32",
            "--device",
            "cpu",
            "-q",
            "--shifts",
            "none",
        ]
    )
    assert code == 2
    assert "causal" in capsys.readouterr().err
