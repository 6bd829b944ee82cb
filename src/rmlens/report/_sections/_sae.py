"""The SAE lens (``rmlens sae``): which latents of the audit's SAE drive TG and CM, each
shown with its name card (``sae/config.json`` and ``sae/cards.json``)."""

from __future__ import annotations

import math
from typing import Any

from .._html import esc, fmt, snippet, warning_box
from ._base import Section

FVU_WARN = 0.3  # held-out FVU at or above this: the latents describe the features only roughly
TOP_SHAP = 5  # latents listed per target
TOP_WEIGHT = 8  # latents listed by head weight when no card carries SHAP shares
SHOWN = 3  # correlates and top responses per card
TEXT_CHARS = 300
_TARGETS = {"tg": "TG (generalization)", "cm": "CM (memorization)"}
_HINT = (
    "run <code>rmlens attribute DIR --features sae</code>, then <code>rmlens sae DIR</code> "
    "again, to put the latents' SHAP shares on the cards."
)


def sae_section(record: dict | None, cards: list[dict] | None) -> Section | None:
    """The SAE, its fit (FVU, dead latents), and the latents that drive TG and CM by SHAP
    share, or, before an attribution has run with them, those the heads weigh most."""
    if record is None and cards is None:
        return None
    record = record if isinstance(record, dict) else {}
    valid = [c for c in cards if isinstance(c, dict)] if isinstance(cards, list) else []
    body = _intro(record, valid)
    fvu = _num(record.get("fvu"))
    if fvu is not None and fvu >= FVU_WARN:
        body += warning_box(
            f"FVU {fmt(fvu)} (at least {FVU_WARN:g}): the SAE leaves much of the response "
            "features' variance unexplained, so the latents describe the features only roughly."
        )
    if isinstance(record.get("size_warning"), str):  # more latents than responses
        body += warning_box(record["size_warning"].replace("`", ""))
    if not valid:
        body += warning_box("No name cards: sae/cards.json is missing, unreadable or empty.")
        return Section("sae", "SAE lens", body)
    if any(_shap(c, t) for c in valid for t in ("tm", "tg", "cm")):
        if isinstance(record.get("shap"), str):
            body += f'<p class="note">{esc(record["shap"])}.</p>'
        for target, label in _TARGETS.items():
            body += f"<h3>Latents that drive {esc(label)}</h3>" + _by_shap(valid, target)
    else:
        body += f'<p class="note">No SHAP shares on the cards yet: {_HINT}</p>'
        body += _by_weight(valid)
    body += (
        f'<p class="note">All {len(valid):,} cards are in sae/cards.json; every latent\'s '
        "correlation with each hand-built feature is in sae/correlations.parquet.</p>"
    )
    return Section("sae", "SAE lens", body)


def _intro(record: dict, cards: list[dict]) -> str:
    """What the SAE is and how well it reconstructs the features, in two sentences."""
    if not record:
        return (
            '<p class="note">sae/config.json is missing or unreadable: the SAE\'s settings '
            "and FVU are unknown; the cards below come from sae/cards.json.</p>"
        )
    settings = _dict(record.get("settings"))
    source = record.get("source")
    n_resp, n_held = _num(record.get("n_responses")), _num(record.get("n_heldout"))
    dead = _num(record.get("dead_latents"))
    features = "pooled response features"
    if record.get("backbone"):
        features += f" of {record['backbone']}"
    if _num(record.get("d")) is not None:
        features += f" ({_int(record['d'])} dimensions)"
    if source in (None, "trained here"):
        n_latents = settings.get("n_latents")
        trained = (f" on {_int(n_resp - n_held)} of the audit's {_int(n_resp)} distinct "
                   "responses" if n_resp is not None and n_held is not None else "")  # fmt: skip
        what = (f"A TopK sparse autoencoder with {_int(n_latents)} latents (k = "
                f"{_int(settings.get('k'))} active per response), trained{trained}, reads the "
                f"{features} that the reward heads read.")  # fmt: skip
        where = f"on the {_int(n_held)} held-out responses"
    else:
        n_latents = dead + len(cards) if dead is not None and cards else None
        what = (f"A sparse autoencoder trained elsewhere, loaded from {source} "
                f"({_int(n_latents)} latents), reads the {features} that the reward heads "
                "read.")  # fmt: skip
        where = f"on all {_int(n_resp)} responses"
    fit = (f" FVU (fraction of variance unexplained) {where}: {fmt(_num(record.get('fvu')))} "
           f"({fmt(_num(record.get('fvu_standardized')))} on standardized features); "
           f"{_int(dead)} of {_int(n_latents)} latents are dead (never active).")  # fmt: skip
    runs = f" over the {_int(record['n_runs'])} runs" if _num(record.get("n_runs")) else ""
    pair = (" A latent's pair feature sae_<j> is its activation on the chosen response minus "
            "that on the rejected one; its head weight is the heads' reward change per unit "
            f"step along its decoder direction, mean \u00b1 std{runs}.")  # fmt: skip
    return f'<p class="note">{esc(what + fit + pair)}</p>'


def _by_shap(cards: list[dict], target: str) -> str:
    """The cards of the ``TOP_SHAP`` latents with the largest SHAP share of ``target`` among
    informative fits; a line saying why when there are none."""
    name = target.upper()
    shares = [(c, _shap(c, target)) for c in cards]
    shares = [(c, s) for c, s in shares if s is not None and _num(s.get("share")) is not None]
    if not shares:
        return f'<p class="note">No SHAP shares for {name} on the cards: {_HINT}</p>'
    useful = [(c, s) for c, s in shares if s.get("informative", True) is not False]
    if not useful:
        return (f'<p class="note">The {name} fit is not informative (held-out R\u00b2 below '
                "the floor, see Attribution): its latents are not ranked.</p>")  # fmt: skip
    useful.sort(key=lambda cs: -_num(cs[1]["share"]))  # type: ignore[operator]
    lead = (f"The largest shares of the {name} fit's mean |SHAP| over all pair features. "
            + ("A latent high here and low for TG is one the reward models use to memorize "
               "rather than to generalize." if target == "cm" else
               "These latents carry what the reward models learn that holds on pairs they "
               "never saw."))  # fmt: skip
    return f'<p class="note">{esc(lead)}</p>' + _grid(c for c, _ in useful[:TOP_SHAP])


def _by_weight(cards: list[dict]) -> str:
    """The cards of the ``TOP_WEIGHT`` latents with the largest |mean head weight|; the most
    frequent ones when no head is linear (MLP heads have no weight along a direction)."""
    weighted = [(c, _num(_dict(c.get("head_weight")).get("mean"))) for c in cards]
    weighted = [(c, abs(w)) for c, w in weighted if w is not None]
    if weighted:
        head = "<h3>Latents the heads weigh most</h3>"
        lead = ("Largest |mean head weight|: the directions along which the reward models' "
                "scores move most per unit of activation.")  # fmt: skip
    else:
        weighted = [(c, _num(c.get("frequency")) or 0.0) for c in cards]
        head = "<h3>Most frequent latents</h3>"
        lead = "No latent has a head weight (the heads are not linear, e.g. MLP heads)."
    weighted.sort(key=lambda cw: -cw[1])
    return f'{head}<p class="note">{esc(lead)}</p>' + _grid(c for c, _ in weighted[:TOP_WEIGHT])


def _grid(cards: Any) -> str:
    return '<div class="grid">' + "".join(_card(c) for c in cards) + "</div>"


def _card(card: dict) -> str:
    """One latent's name card; every string from the file is escaped here."""
    rows = []
    for target in ("tm", "tg", "cm"):
        share = _shap(card, target)
        text = "\u2013"
        if share is not None:
            text = f"{fmt(_num(share.get('share')))}, #{_int(share.get('rank_among_latents'))} "
            text += "among latents"
            if share.get("informative", True) is False:
                text += " (fit not informative)"
        rows.append((f"SHAP share {target.upper()}", text))
    weight = _dict(card.get("head_weight"))
    mean, std = _num(weight.get("mean")), _num(weight.get("std"))
    runs = f"over {_int(weight.get('runs'))} runs"
    rows.append(("head weight", f"{mean:+.3f} \u00b1 {fmt(std)} {runs}" if mean is not None
                 else "\u2013 (no linear head)"))  # fmt: skip
    rows.append(("active on", f"{fmt(_num(card.get('frequency')))} of responses, mean "
                 f"activation {fmt(_num(card.get('mean_activation')))}"))  # fmt: skip
    correlates = [c for c in _list(card.get("correlates")) if isinstance(c, dict)][:SHOWN]
    listed = ", ".join(f"{c.get('feature')} {_rho(c.get('spearman'))}" for c in correlates)
    rows.append(("correlates (Spearman)", listed or "\u2013"))
    meta = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in rows)
    return (f'<div class="card" style="max-width:none"><h4>{esc(_name(card))}</h4>'
            f'<dl class="meta">{meta}</dl>{_responses(card)}</div>')  # fmt: skip


def _responses(card: dict) -> str:
    """The latent's top responses, folded: activation, model, prompt and the text cut."""
    shown = [r for r in _list(card.get("top_responses")) if isinstance(r, dict)][:SHOWN]
    if not shown:
        return ""
    items = []
    for r in shown:
        label = f"activation {fmt(_num(r.get('activation')))}"
        if r.get("model"):
            label += f" \u00b7 model {r['model']}"
        prompt = (f'<div class="note">prompt: {esc(snippet(r["prompt"], 160))}</div>'
                  if r.get("prompt") else "")  # fmt: skip
        items.append(
            f'<div class="label">{esc(label)}</div>{prompt}'
            f'<div class="pair-text">{esc(_cut(r.get("text", "")))}</div>'
        )
    return f"<details><summary>Top {len(shown)} responses</summary>{''.join(items)}</details>"


def _name(card: dict) -> str:
    return str(card.get("name") or f"sae_{card.get('latent', '?')}")


def _shap(card: dict, target: str) -> dict | None:
    entry = _dict(card.get("shap")).get(target)
    return entry if isinstance(entry, dict) else None


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _num(value: Any) -> float | None:
    """A finite float, or None (missing, NaN written as null, not a number)."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _int(value: Any) -> str:
    number = _num(value)
    if number is None:
        return "\u2013" if value is None else str(value)
    return f"{int(number):,}" if number.is_integer() else fmt(number)


def _rho(value: Any) -> str:
    number = _num(value)
    return "\u2013" if number is None else f"{number:+.2f}"


def _cut(text: Any) -> str:
    text = str(text)
    if not text.strip():
        return "(empty response)"
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "\u2026"
