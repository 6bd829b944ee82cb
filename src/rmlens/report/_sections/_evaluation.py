"""The evaluation of ``rmlens evaluate`` (metrics.json and probes.parquet) as readable tables.

Every block of metrics.json (``rmlens.evaluation.evaluate``'s return value) has its own
table or sentence: accuracy and calibration per split, margins, calibration bins, reward
distribution, breakdowns, RewardBench sections, ensemble disagreement, probes. Entries the
report does not know are shown by their humanised keys, lists only counted.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from .._html import (
    esc,
    figure_div,
    fmt,
    num_list,
    plotly_text,
    prose,
    readable_rows,
    table,
    warning_box,
)
from ._base import Section, bar_layout

# metrics.json entries that have a block of their own (``config`` is in evaluate.toml)
_KNOWN = {
    "n_pairs", "accuracy", "ece", "brier", "log_loss", "n_ties", "margin_mean",
    "abs_margin_norm", "calibration", "reward_distribution", "warnings", "margin_spearman",
    "by", "rewardbench", "ensemble", "cross_fitted", "in_train", "held_out",
    "posthoc_calibration", "dropped_truncation", "temperature", "probes", "rm", "config",
    "version", "files",
}  # fmt: skip
MAX_GROUPS = 50  # rows of an accuracy-by-column table, at most


def evaluation_section(metrics: Any, probes: pd.DataFrame | None) -> Section | None:
    """Evaluation metrics (a matrix when metrics.json is split -> metric -> value; readable
    tables for ``rmlens evaluate``'s metrics.json) and the shortcut probes."""
    if metrics is None and probes is None:
        return None
    body = ""
    figures: list[dict[str, Any]] = []
    config: dict[str, Any] = {}
    if isinstance(metrics, dict) and metrics:
        if _nested(metrics):
            frame = pd.DataFrame.from_dict(metrics, orient="index")
            frame.insert(0, "split", [str(i) for i in frame.index])
            body += "<h3>Metrics</h3>" + table(frame.reset_index(drop=True))
        else:
            body += _metrics_html(metrics)
            config = metrics.get("config") if isinstance(metrics.get("config"), dict) else {}
            rows = [r for r in metrics.get("probes") or [] if isinstance(r, dict)]
            if probes is None and rows:
                probes = pd.DataFrame(rows)
    elif metrics is not None:
        body += warning_box(
            f"metrics.json holds a {type(metrics).__name__}, not the object `rmlens evaluate` "
            "writes; not shown."
        )
    if probes is not None:
        body += _probes_html(probes, config, metrics, figures)
    return Section("evaluation", "Evaluation", body, figures)


def _nested(metrics: dict[str, Any]) -> bool:
    """Whether metrics.json is split -> metric -> scalar (a trainer's metrics)."""
    return all(
        isinstance(v, dict) and all(not isinstance(x, (dict, list)) for x in v.values())
        for v in metrics.values()
    )


def _number(value: Any) -> float | None:
    """``value`` as a finite float, or None (missing, not a number, NaN, bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _count(value: Any) -> str:
    """A count as an integer with thousands separators; an en dash when missing."""
    x = _number(value)
    if x is None:
        return "\u2013"
    return f"{int(x):,}" if x.is_integer() else fmt(x)


def _amount(value: Any) -> str:
    """A mean count (RMs per pair): whole numbers as integers, others with 2 decimals."""
    x = _number(value)
    if x is None:
        return "\u2013"
    return f"{int(x):,}" if x.is_integer() else f"{x:.2f}"


def _share(value: Any) -> str:
    x = _number(value)
    return "\u2013" if x is None else f"{x:.1%}"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _kv(rows: list[tuple[str, str]], header: str = "figure", caption: str | None = None) -> str:
    return table(pd.DataFrame(rows, columns=[header, "value"]), classes="kv", caption=caption)


def _metrics_html(m: dict[str, Any]) -> str:
    """The blocks of an ``rmlens evaluate`` metrics.json, in reading order."""
    html = "".join(
        warning_box(_capital(str(w.get("message", w)) if isinstance(w, dict) else str(w)))
        for w in m.get("warnings") or []
    )
    html += _rm_sentence(m)
    html += "<h3>Accuracy and calibration</h3>" + _headline(m)
    html += _margins(m)
    html += _bins(m.get("calibration"), m.get("ece"))
    html += _distribution(m.get("reward_distribution"))
    html += _by(m.get("by"))
    html += _rewardbench(m.get("rewardbench"))
    html += _ensemble(m.get("ensemble"))
    html += _others({k: v for k, v in m.items() if k not in _KNOWN})
    files = [str(f) for f in m.get("files") or [] if isinstance(f, str)]
    if files:
        html += f'<p class="note">Files of the evaluation: {esc(", ".join(files))}.</p>'
    return html


def _rm_sentence(m: dict[str, Any]) -> str:
    """'RM: EnsembleRM, 5 members, from <source> (rmlens 0.1.0).' and the dropped pairs."""
    html = ""
    rm = m.get("rm")
    if isinstance(rm, dict) and rm.get("class"):
        text = f"RM: {rm['class']}"
        if _number(rm.get("members")) is not None:
            n = int(rm["members"])
            text += f", {n:,} member{'s' if n != 1 else ''}"
        if rm.get("source"):
            text += f", from {rm['source']}"
        if m.get("version"):
            text += f" (evaluated with rmlens {m['version']})"
        html += f'<p class="note">{esc(text)}.</p>'
    dropped = m.get("dropped_truncation")
    n = _number(dropped.get("count")) if isinstance(dropped, dict) else None
    if n:
        html += (
            f'<p class="note">{_count(n)} pair{"s were" if n != 1 else " was"} left out: '
            "chosen and rejected were the same text after truncation.</p>"
        )
    return html


def _split_row(label: str, part: dict[str, Any], per_pair: Any) -> dict[str, Any]:
    return {
        "pairs scored": label,
        "pairs": _count(part.get("n_pairs")),
        "accuracy": _number(part.get("accuracy")),
        "log-loss": _number(part.get("log_loss")),
        "Brier": _number(part.get("brier")),
        "ECE": _number(part.get("ece")),
        "RMs per pair": _amount(per_pair),
    }


def _headline(m: dict[str, Any]) -> str:
    """Accuracy, log-loss, Brier and ECE per split: cross-fitted and in-sample, the
    membership split of an ensemble, or all pairs."""
    cross = m.get("cross_fitted") if isinstance(m.get("cross_fitted"), dict) else None
    held = m.get("held_out") if isinstance(m.get("held_out"), dict) else None
    fit = m.get("in_train") if isinstance(m.get("in_train"), dict) else None
    rm = m.get("rm") if isinstance(m.get("rm"), dict) else {}
    members = rm.get("members", 1 if rm else None)
    rows, notes = [], []
    if cross is not None:
        top = {**m, "n_pairs": cross.get("n_pairs", m.get("n_pairs"))}
        rows.append(_split_row("held out (cross-fitted)", top, cross.get("runs_per_pair")))
        if fit is not None:
            rows.append(_split_row("trained on (in-sample)", fit, fit.get("members_per_pair")))
        if cross.get("note"):  # the in-sample row, not the key, is what the page shows
            note = str(cross["note"]).replace("in_train gives", "the in-sample row gives")
            notes.append(_capital(note) + ".")
        left = cross.get("left_out")
        n_left = _number(left.get("count")) if isinstance(left, dict) else None
        if n_left:
            notes.append(f"{_count(n_left)} pair{'s' if n_left != 1 else ''} that no run held "
                         "out left out.")  # fmt: skip
    elif held is not None or fit is not None:
        if held is not None:
            rows.append(_split_row("held out (members that did not train on the pair)", held,
                                   held.get("members_per_pair")))  # fmt: skip
        if fit is not None:
            rows.append(_split_row("trained on (in-sample)", fit, fit.get("members_per_pair")))
        rows.append(_split_row("all pairs (members mixed)", m, members))
        notes.append(
            "The ensemble's members trained on some of these pairs: each split "
            "averages the margins of the members in it; the last row mixes them."
        )
    else:
        rows.append(_split_row("all pairs", m, members))
    if isinstance(m.get("posthoc_calibration"), dict):
        notes.append("Every figure is of the length-calibrated reward r \u2212 f(length) (post-hoc "
                     "length calibration, below).")  # fmt: skip
    frame = pd.DataFrame(rows)
    for column in ("log-loss", "RMs per pair"):
        if frame[column].isna().all() or (frame[column] == "\u2013").all():
            frame = frame.drop(columns=column)
    html = table(frame, caption="chance: accuracy 0.5 (a tie counts 1/2), log-loss 0.693, "
                                "Brier 0.25")  # fmt: skip
    html += "".join(f'<p class="note">{prose(n)}</p>' for n in notes)
    return html


def _margins(m: dict[str, Any]) -> str:
    """Mean margin, normalised |margin|, ties, agreement with the data's margin,
    temperature scaling and the post-hoc length calibration."""
    rows = []
    if "margin_mean" in m:
        rows.append(("mean margin r+ \u2212 r\u2212", fmt(m["margin_mean"])))
    if "abs_margin_norm" in m:
        rows.append(("mean |margin| / std of all rewards", fmt(m["abs_margin_norm"])))
    if "n_ties" in m:
        rows.append(("ties (r+ = r\u2212)", f"{_count(m['n_ties'])} of {_count(m.get('n_pairs'))}"
                                            " pairs"))  # fmt: skip
    rho = m.get("margin_spearman")
    if isinstance(rho, dict):
        n = _count(rho.get("n"))
        if _number(rho.get("rho")) is not None:
            text = (f"\u03c1 {fmt(rho['rho'])} (p {fmt(rho.get('p_value'), 2)}, {n} pairs "
                    "with a margin)")  # fmt: skip
        else:
            text = f"not measurable ({n} pairs with a margin; it needs 3 and some spread)"
        rows.append(("Spearman with the data's margin", text))
    temp = m.get("temperature")
    if isinstance(temp, dict) and "temperature" in temp:
        rows.append((
            "temperature scaling",
            f"T = {fmt(temp['temperature'])}, fitted on {_count(temp.get('n_fit'))} pairs; on "
            f"the other {_count(temp.get('n_eval'))}: ECE {fmt(temp.get('ece_before'))} \u2192 "
            f"{fmt(temp.get('ece_after'))}, Brier {fmt(temp.get('brier_before'))} \u2192 "
            f"{fmt(temp.get('brier_after'))}",
        ))  # fmt: skip
    html = "<h3>Margins</h3>" + _kv(rows) if rows else ""
    return html + _posthoc(m.get("posthoc_calibration"))


def _posthoc(block: Any) -> str:
    """The post-hoc length calibration (``posthoc_calibration``) as a small table."""
    if not isinstance(block, dict):
        return ""
    rows = [
        ("reward used", f"r \u2212 f(length), f a LOWESS fit of reward on length "
                        f"({block.get('unit', 'characters')}), frac {fmt(block.get('frac'), 2)}, "
                        f"{_count(block.get('it'))} robustness rounds"),
        ("responses f was fitted on", _count(block.get("n_responses"))),
        ("Spearman of reward with length",
         f"{fmt(block.get('corr_before'))} before, {fmt(block.get('corr_after'))} after"),
        ("accuracy", f"{fmt(block.get('accuracy_before'))} before, "
                     f"{fmt(block.get('accuracy_after'))} after"),
        ("pairs whose preference turned", _share(block.get("flipped"))),
    ]  # fmt: skip
    return (f"<h4>Post-hoc length calibration ({esc(block.get('method', 'length'))})</h4>"
            + _kv(rows))  # fmt: skip


def _bins(calibration: Any, ece: Any) -> str:
    """The reliability bins: confidence range, mean confidence, accuracy, pairs."""
    if not isinstance(calibration, dict):
        return ""
    bins = [b for b in calibration.get("bins") or [] if isinstance(b, dict)]
    if not bins:
        return ""
    frame = pd.DataFrame({
        "bin": range(1, len(bins) + 1),
        "confidence range": [f"[{fmt(b.get('lo'))}, {fmt(b.get('hi'))}]" for b in bins],
        "mean confidence": [_number(b.get("confidence")) for b in bins],
        "accuracy": [_number(b.get("accuracy")) for b in bins],
        "pairs": [_count(b.get("n")) for b in bins],
    })  # fmt: skip
    kind = calibration.get("binning")
    caption = f"{len(bins)} {kind} bins" if kind else f"{len(bins)} bins"
    if _number(ece) is not None:
        caption += (f"; ECE {fmt(ece)}: |accuracy \u2212 mean confidence| averaged over bins "
                    "weighted by their pairs")  # fmt: skip
    return "<h3>Calibration</h3>" + table(frame, caption=caption)


_DISTRIBUTION = (
    ("n", "rewards"), ("mean", "mean"), ("std", "std"), ("min", "min"), ("q01", "1%"),
    ("median", "median"), ("q99", "99%"), ("max", "max"), ("skew", "skew"),
    ("excess_kurtosis", "excess kurtosis"), ("extreme_share", "share |z| > 3"),
    ("mode_share", "share at the mode"), ("collapsed", "collapsed"),
)  # fmt: skip


def _distribution(dist: Any) -> str:
    """The rewards' distribution (chosen and rejected pooled) in one row."""
    if not isinstance(dist, dict) or not dist:
        return ""
    row: dict[str, Any] = {}
    for key, label in _DISTRIBUTION:
        if key not in dist:
            continue
        value = dist[key]
        if key == "n":
            value = _count(value)
        elif key == "collapsed":
            value = "yes" if value else "no"
        else:
            value = _number(value)
        row[label] = value
    return "<h3>Reward distribution</h3>" + table(
        pd.DataFrame([row]), caption="every reward, chosen and rejected pooled"
    )


def _by(by: Any) -> str:
    """Accuracy per value of each ``by`` column, one table per column."""
    if not isinstance(by, dict):
        return ""
    html = ""
    for column, groups in by.items():
        if not isinstance(groups, dict) or not groups:
            continue
        frame = pd.DataFrame([
            {str(column): str(g), "n": _number(v.get("n")), "accuracy": _number(v.get("accuracy"))}
            for g, v in groups.items() if isinstance(v, dict)
        ]).sort_values("n", ascending=False, kind="stable")  # fmt: skip
        shown = frame.head(MAX_GROUPS).copy()
        shown["n"] = [_count(v) for v in shown["n"]]
        html += f"<h4>Accuracy by {esc(column)}</h4>" + table(shown.rename(columns={"n": "pairs"}))
        if len(frame) > MAX_GROUPS:
            html += (f'<p class="note">The {MAX_GROUPS} largest of {len(frame):,} groups; all '
                     "are in metrics.json.</p>")  # fmt: skip
    return html


def _rewardbench(bench: Any) -> str:
    """RewardBench sections (accuracy, pairs, subsets) and the score."""
    if not isinstance(bench, dict) or not isinstance(bench.get("sections"), dict):
        return ""
    frame = pd.DataFrame([
        {"section": str(name), "pairs": _count(s.get("n")), "accuracy": _number(s.get("accuracy")),
         "subsets": ", ".join(map(str, s.get("subsets") or []))}
        for name, s in bench["sections"].items() if isinstance(s, dict)
    ])  # fmt: skip
    html = "<h4>RewardBench sections</h4>"
    if _number(bench.get("score")) is not None:
        html += (
            f'<p class="note">RewardBench score {fmt(bench["score"])}: the mean of the '
            "section accuracies, each section weighting its subsets by RewardBench's example "
            "counts (a subset RewardBench does not know is a section of its own).</p>"
        )
    return html + (table(frame) if len(frame) else "")


def _ensemble(ens: Any) -> str:
    """How the ensemble's members disagree, and whether that predicts its errors."""
    if not isinstance(ens, dict):
        return ""
    rows = []
    if "n_members" in ens:
        rows.append(("members", _count(ens["n_members"])))
    if "member_accuracy_mean" in ens:
        rows.append(("member accuracy", f"{fmt(ens['member_accuracy_mean'])} on average, from "
                     f"{fmt(ens.get('member_accuracy_min'))} to "
                     f"{fmt(ens.get('member_accuracy_max'))}"))  # fmt: skip
    if "disagreement_mean" in ens:
        rows.append(("disagreement (std of the members' margins), mean",
                     fmt(ens["disagreement_mean"])))  # fmt: skip
    if "disagreement_correct" in ens:
        rows.append(("on pairs the ensemble gets right", fmt(ens["disagreement_correct"])))
    if "disagreement_wrong" in ens:
        rows.append((f"on the {_count(ens.get('n_wrong'))} pairs it gets wrong (ties included)",
                     fmt(ens["disagreement_wrong"])))  # fmt: skip
    if "disagreement_auroc" in ens:
        rows.append(("AUROC of disagreement for an error (0.5: no relation)",
                     fmt(ens["disagreement_auroc"])))  # fmt: skip
    known = {"n_members", "member_accuracy_mean", "member_accuracy_min", "member_accuracy_max",
             "disagreement_mean", "disagreement_correct", "disagreement_wrong", "n_wrong",
             "disagreement_auroc"}  # fmt: skip
    rows += readable_rows({k: v for k, v in ens.items() if k not in known}, "metrics.json")
    return "<h4>Ensemble</h4>" + _kv(rows) if rows else ""


def _others(rest: dict[str, Any]) -> str:
    rows = readable_rows(rest, "metrics.json")
    return "<h3>Other figures</h3>" + _kv(rows) if rows else ""


def _probes_html(
    probes: pd.DataFrame, config: dict[str, Any], metrics: Any, figures: list[dict[str, Any]]
) -> str:
    """The shortcut probes' table and their flip rates as bars."""
    scope = ""
    n_pairs = _number(metrics.get("n_pairs")) if isinstance(metrics, dict) else None
    cap = _number(config.get("probe_pairs"))
    if n_pairs is not None:
        n = int(min(cap, n_pairs)) if cap else int(n_pairs)
        sample = f" (a seeded sample of {int(n_pairs):,})" if n < n_pairs else ""
        scope = f" Probes ran on {n:,} pairs{sample}."
    html = (
        "<h3>Shortcut probes</h3>"
        '<p class="note">mean_shift: mean change in reward when the probe edit is applied to '
        "one side; flip_rate: share of pairs whose preferred response flips, with its 95% "
        f"Wilson interval over the n pairs the edit changed.{esc(scope)}</p>"
    )
    html += table(probes)
    if {"probe", "flip_rate"} <= set(probes.columns):
        sides = probes["side"].astype(str) if "side" in probes.columns else None
        data = []
        for side in [None] if sides is None else sorted(sides.unique()):
            part = probes if side is None else probes[sides == side]
            bar = {
                "type": "bar",
                "name": plotly_text(side or "flip rate"),
                "x": [plotly_text(p) for p in part["probe"].astype(str)],
                "y": num_list(part["flip_rate"]),
            }
            if {"flip_rate_lo", "flip_rate_hi"} <= set(part.columns):
                rate = part["flip_rate"]
                bar["error_y"] = {"type": "data", "symmetric": False,
                                  "array": num_list(part["flip_rate_hi"] - rate),
                                  "arrayminus": num_list(rate - part["flip_rate_lo"])}  # fmt: skip
            data.append(bar)
        html += figure_div("probes-plot", 300)
        layout = bar_layout(
            300,
            barmode="group",
            yaxis={"title": {"text": "flip rate"}, "gridcolor": "#eee", "automargin": True},
        )
        figures.append({"id": "probes-plot", "figure": {"data": data, "layout": layout}})
    return html
