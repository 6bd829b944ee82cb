"""The SAE lens in report.html: the SAE's fit, the latents that drive TG and CM by SHAP
share (or the heads' weights before an attribution ran with them), escaped name cards."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rmlens.report import write_report
from rmlens.report._sections import sae_section
from rmlens.sae import fit_sae
from test_report import make_experiment
from test_sae import FAST, cache, tiny_audit  # noqa: F401 - fixtures of the e2e test

EVIL = "<script>window.__pwned=7</script> sure, here you go"
TG_SHARES = [0.05, 0.20, 0.01, 0.12, 0.30, 0.08]  # by latent
CM_SHARES = [0.15, 0.02, 0.09, 0.40, 0.03, 0.11]
WEIGHTS = [0.1, -0.9, 0.3, 0.05, -0.2, 0.6]


def record(fvu: float = 0.1) -> dict:
    return {
        "settings": {"n_latents": 16, "k": 3, "standardize": True},
        "source": "trained here",
        "fvu": fvu,
        "fvu_standardized": fvu + 0.02,
        "dead_latents": 10,
        "n_responses": 90,
        "n_heldout": 9,
        "n_pairs": 48,
        "n_runs": 4,
        "backbone": "tiny-bert",
        "d": 32,
        "shap": "SHAP of lightgbm, from attribution.parquet",
    }


def cards(shap: bool = True) -> list[dict]:
    out = []
    for j in range(6):
        shares = {"tm": 0.1, "tg": TG_SHARES[j], "cm": CM_SHARES[j]}
        by_tg = sorted(range(6), key=lambda i: -TG_SHARES[i]).index(j) + 1
        out.append({
            "latent": j, "name": f"sae_{j}", "frequency": 0.25, "mean_activation": 1.5,
            "top_responses": [{"activation": 2.0 - r / 10, "model": "m1" if r else None,
                               "text": (EVIL if j == 4 and r == 0 else f"text {j}.{r} ") * 40,
                               "prompt": "q"} for r in range(4)],
            "correlates": [{"feature": "len_words", "spearman": 0.6234},
                           {"feature": "model=m1", "spearman": -0.3111},
                           {"feature": "caps", "spearman": 0.1},
                           {"feature": "fourth_one", "spearman": 0.05}],
            "head_weight": {"mean": WEIGHTS[j], "std": 0.05, "runs": 4.0},
            "shap": {t: {"share": s, "rank": j + 3, "rank_among_latents": by_tg,
                         "informative": t != "tm"} for t, s in shares.items()} if shap else None,
        })  # fmt: skip
    return out


def experiment(root: Path, config: dict | None, cards_: list[dict] | None) -> Path:
    make_experiment(root, full=False)
    (root / "sae").mkdir()
    if config is not None:
        (root / "sae" / "config.json").write_text(json.dumps(config))
    if cards_ is not None:
        (root / "sae" / "cards.json").write_text(json.dumps(cards_))
    return root


def section(page: str) -> str:
    start = page.index('<section id="sae">')
    return page[start : page.index("</section>", start)]


def listed(html: str, heading: str) -> list[str]:
    """The card names under the ``<h3>`` that starts with ``heading``, in page order."""
    part = html[html.index(f"<h3>{heading}") :]
    part = part[: part.find("<h3>", 4)] if "<h3>" in part[4:] else part
    return re.findall(r"<h4>(.*?)</h4>", part)


def test_latents_ranked_by_shap_share_and_escaped(tmp_path: Path) -> None:
    root = experiment(tmp_path / "exp", record(0.1), cards())
    page = write_report(root).read_text(encoding="utf-8")
    html = section(page)
    assert "SAE lens" in html and "16 latents (k = 3" in html
    assert "trained on 81 of the audit&#x27;s 90 distinct responses" in html
    assert "roughly" not in html  # FVU 0.1: no warning
    assert listed(html, "Latents that drive TG") == ["sae_4", "sae_1", "sae_3", "sae_5", "sae_0"]
    assert listed(html, "Latents that drive CM") == ["sae_3", "sae_0", "sae_5", "sae_2", "sae_4"]
    assert "<script>window.__pwned" not in page
    assert "&lt;script&gt;window.__pwned=7&lt;/script&gt;" in html
    assert "+0.62" in html and "-0.31" in html and "fourth_one" not in html  # top 3 rho
    assert "-0.200 \u00b1 0.050 over 4 runs" in html and "4.0 runs" not in html
    assert "(fit not informative)" in html  # the TM fit, on each card
    assert html.count("<details>") == 10 and "Top 3 responses" in html
    cut = re.findall(r'<div class="pair-text">(.*?)</div>', html)
    assert cut and all(len(t) <= 300 for t in cut if "&" not in t)


def test_section_follows_attribution(tmp_path: Path) -> None:
    root = make_experiment(tmp_path / "full")
    (root / "sae").mkdir()
    (root / "sae" / "config.json").write_text(json.dumps(record()))
    (root / "sae" / "cards.json").write_text(json.dumps(cards()))
    page = write_report(root).read_text(encoding="utf-8")
    ids = re.findall(r'<section id="([^"]+)">', page)
    assert ids[ids.index("attribution") + 1] == "sae"


def test_fvu_warning() -> None:
    high = sae_section(record(0.47), cards()).body
    assert 'class="warning"' in high and "describe the features only roughly" in high
    low = sae_section(record(0.1), cards()).body
    assert 'class="warning"' not in low
    assert sae_section(None, None) is None


def test_without_shap_the_heads_weights_and_the_command(tmp_path: Path) -> None:
    root = experiment(tmp_path / "exp", record(), cards(shap=False))
    html = section(write_report(root).read_text(encoding="utf-8"))
    assert "Latents that drive" not in html
    assert "<code>rmlens attribute DIR --features sae</code>" in html
    assert "<code>rmlens sae DIR</code>" in html
    order = sorted(range(6), key=lambda j: -abs(WEIGHTS[j]))
    assert listed(html, "Latents the heads weigh most") == [f"sae_{j}" for j in order]


def test_a_fit_that_is_not_informative_ranks_nothing() -> None:
    useless = cards()
    for card in useless:
        card["shap"]["cm"]["informative"] = False
    html = sae_section(record(), useless).body
    assert listed(html, "Latents that drive CM") == []
    assert "The CM fit is not informative" in html
    assert len(listed(html, "Latents that drive TG")) == 5


def test_broken_cards_do_not_break_the_report(tmp_path: Path) -> None:
    root = experiment(tmp_path / "exp", record(), None)
    (root / "sae" / "cards.json").write_text("{not json")
    page = write_report(root).read_text(encoding="utf-8")
    assert "cards.json: not valid JSON" in page
    assert "No name cards" in section(page)
    odd = sae_section({"fvu": "x", "settings": 3}, [1, {"name": "<b>"}, {"shap": []}]).body
    assert "Most frequent latents" in odd and "&lt;b&gt;" in odd and "<b>" not in odd


def test_report_after_fit_sae(cache: Path) -> None:  # noqa: F811 - the fixture
    lens = fit_sae(cache, quiet=True, **FAST)
    html = section(write_report(cache).read_text(encoding="utf-8"))
    shown = listed(html, "Latents the heads weigh most")
    assert shown and set(shown) <= {c["name"] for c in lens.cards}
    assert f"{len(lens.cards)} cards" in html


def test_more_latents_than_responses_is_a_warning_on_the_page() -> None:
    from rmlens.sae._lens import size_warning

    oversized = {**record(0.1), "size_warning": size_warning(512, 16, 270)}
    body = sae_section(oversized, cards()).body
    assert 'class="warning"' in body and "512 is more than the 270 responses" in body
    assert "try n_latents 64" in body
