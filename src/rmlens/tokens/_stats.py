"""Statistics of vocabulary sweeps: extremes, moments, framing, agreement, frequency bias.

All functions take sweep tables (``token_id, token, decoded, prompt, score, rank``) as
:func:`sweep_prompt` returns them, for one model; agreement compares several models.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats

from rmlens.stats import spearman_test


def moments(scores) -> dict:
    """Mean, standard deviation, skewness and excess kurtosis of the scores.

    With m_k = mean((x - mean(x))^k): ``std`` uses ddof=1, ``skew`` = m3 / m2^(3/2)
    (Fisher-Pearson, > 0: a long tail of high-scoring tokens), ``kurtosis`` = m4 / m2^2 - 3
    (0 for a normal distribution).

    Parameters
    ----------
    scores : array-like of float
        The scores (one per token); NaN and infinite values are left out.

    Returns
    -------
    dict
        ``n`` (the finite scores counted), ``mean``, ``std``, ``skew`` and ``kurtosis``;
        NaN where fewer than 2 scores (or no spread) leave a figure undefined.
    """
    x = np.asarray(scores, dtype=np.float64)
    x = x[np.isfinite(x)]
    if len(x) < 2:
        return {"n": int(len(x)), "mean": float(np.mean(x)) if len(x) else float("nan"),
                "std": float("nan"), "skew": float("nan"), "kurtosis": float("nan")}
    d = x - x.mean()
    m2, m3, m4 = (d**2).mean(), (d**3).mean(), (d**4).mean()
    return {
        "n": int(len(x)),
        "mean": float(x.mean()),
        "std": float(x.std(ddof=1)),
        "skew": float(m3 / m2**1.5) if m2 > 0 else float("nan"),
        "kurtosis": float(m4 / m2**2 - 3.0) if m2 > 0 else float("nan"),
    }


def top_bottom(frame: pd.DataFrame, k: int = 10) -> pd.DataFrame:
    """The ``k`` highest and lowest scoring tokens of each prompt.

    Parameters
    ----------
    frame : DataFrame
        A sweep table of one model (``prompt, token_id, decoded, score, rank``).
    k : int, default=10
        Tokens kept at each end, per prompt.

    Returns
    -------
    DataFrame
        ``prompt, side ("top" | "bottom"), position (1 = most extreme), token_id, decoded,
        score, rank``.
    """
    rows = []
    for prompt, part in frame.groupby("prompt", sort=False):
        ordered = part.sort_values("rank")
        for side, chosen in (("top", ordered.head(k)), ("bottom", ordered.tail(k)[::-1])):
            for pos, row in enumerate(chosen.itertuples(index=False), 1):
                rows.append({"prompt": prompt, "side": side, "position": pos,
                             "token_id": int(row.token_id), "decoded": row.decoded,
                             "score": float(row.score), "rank": int(row.rank)})
    return pd.DataFrame(rows)


def rank_biased_overlap(ranking_a: Sequence, ranking_b: Sequence, p: float = 0.9) -> float:
    """Extrapolated rank-biased overlap of two rankings (Webber, Moffat & Zobel 2010).

    With A_d = ``|a[:d] & b[:d]|`` / d the agreement at depth d, X_d = A_d * d the overlap,
    s <= l the lengths of the shorter and longer ranking (eq. 32 of the paper)::

        RBO_ext = (1 - p) / p * ( sum_{d=1..l} X_d / d * p^d
                                  + sum_{d=s+1..l} X_s * (d - s) / (s * d) * p^d )
                  + ((X_l - X_s) / l + X_s / s) * p^l

    For rankings of equal length k this is ``(1-p)/p * sum_d A_d p^d + A_k p^k``. It is 1
    for identical rankings and 0 for disjoint ones; ``p`` sets how top-heavy it is: the
    first d ranks carry the weight 1 - p^(d-1) + (1-p)/p * d * (ln(1/(1-p)) -
    sum_{i<d} p^i / i), about 86% for the top 10 at p = 0.9 (eq. 21). Items must be unique
    within each ranking.

    Parameters
    ----------
    ranking_a, ranking_b : sequence of hashable
        Items from best to worst.
    p : float, default=0.9
        Persistence, in (0, 1).

    Returns
    -------
    float
        RBO_ext in [0, 1]; 0 when either ranking is empty.
    """
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p}")
    a, b = list(ranking_a), list(ranking_b)
    if len(a) > len(b):
        a, b = b, a
    s, n = len(a), len(b)  # s, l of the formula
    if s == 0:
        return 0.0
    seen_a: set = set()
    seen_b: set = set()
    overlap = 0
    x = np.zeros(n + 1)  # x[d] = X_d, overlap at depth d
    for d in range(1, n + 1):
        item_b = b[d - 1]
        if d <= s:
            item_a = a[d - 1]
            if item_a == item_b:
                overlap += 1
            else:
                overlap += (item_a in seen_b) + (item_b in seen_a)
            seen_a.add(item_a)
        else:
            overlap += item_b in seen_a
        seen_b.add(item_b)
        x[d] = overlap
    d = np.arange(1, n + 1)
    weights = p ** d.astype(np.float64)
    total = np.sum(x[1:] / d * weights)
    tail = d > s
    total += np.sum(x[s] * (d[tail] - s) / (s * d[tail]) * weights[tail])
    return float((1 - p) / p * total + ((x[n] - x[s]) / n + x[s] / s) * p**n)


def _unique_decoded(part: pd.DataFrame) -> pd.DataFrame:
    """Rows whose decoded text occurs once in this table (shared vocabulary is by text)."""
    counts = part["decoded"].value_counts()
    return part[part["decoded"].map(counts) == 1]


def agreement(frames: dict[str, pd.DataFrame], p: float = 0.9) -> pd.DataFrame:
    """Rank agreement between reward models on the decoded text they share, per prompt.

    Tokens are matched across tokenizers by decoded text; a text that several ids of one
    model decode to (e.g. byte fragments shown as U+FFFD) is left out.

    Parameters
    ----------
    frames : dict of str to DataFrame
        Each model's name and its sweep table.
    p : float, default=0.9
        Persistence of the rank-biased overlap (:func:`rank_biased_overlap`).

    Returns
    -------
    DataFrame
        ``model_a, model_b, prompt, n_shared, kendall_tau`` (tau-b), ``spearman, rbo``
        (rank-biased overlap with persistence ``p``, of the rankings best first).
    """
    rows = []
    for (name_a, fa), (name_b, fb) in combinations(frames.items(), 2):
        for prompt in [q for q in fa["prompt"].unique() if q in set(fb["prompt"])]:
            ua = _unique_decoded(fa[fa["prompt"] == prompt])
            ub = _unique_decoded(fb[fb["prompt"] == prompt])
            both = ua.merge(ub, on="decoded", suffixes=("_a", "_b"))
            row = {"model_a": name_a, "model_b": name_b, "prompt": prompt,
                   "n_shared": int(len(both))}
            if len(both) >= 2:
                row["kendall_tau"] = float(stats.kendalltau(both.score_a, both.score_b)[0])
                row["spearman"] = spearman_test(both.score_a, both.score_b)[0]
                order_a = both.sort_values(["score_a", "decoded"], ascending=[False, True])
                order_b = both.sort_values(["score_b", "decoded"], ascending=[False, True])
                row["rbo"] = rank_biased_overlap(order_a.decoded, order_b.decoded, p)
            rows.append(row)
    columns = ["model_a", "model_b", "prompt", "n_shared", "kendall_tau", "spearman", "rbo"]
    return pd.DataFrame(rows, columns=columns)


def framing(frame: pd.DataFrame, k: int = 100) -> pd.DataFrame:
    """How the prompt moves one model's token scores: every pair of prompts.

    Parameters
    ----------
    frame : DataFrame
        A sweep table of one model over two or more prompts.
    k : int, default=100
        Size of the top of each prompt's ranking that ``top_overlap`` compares.

    Returns
    -------
    DataFrame
        ``prompt_a, prompt_b, n, pearson, spearman, kendall_tau, mean_diff`` (mean of
        score_b - score_a) and ``top_overlap`` (share of the top ``k`` tokens in common).
        An RM that reads the prompt ranks tokens differently under "best" and "worst";
        a high positive correlation there means it mostly ignores the question.
    """
    wide = frame.pivot_table(index="token_id", columns="prompt", values="score", sort=False)
    rows = []
    for pa, pb in combinations(list(frame["prompt"].unique()), 2):
        pair = wide[[pa, pb]].dropna()
        xa, xb = pair[pa].to_numpy(), pair[pb].to_numpy()
        top_a = set(pair[pa].nlargest(k).index)
        top_b = set(pair[pb].nlargest(k).index)
        rows.append({
            "prompt_a": pa, "prompt_b": pb, "n": int(len(pair)),
            "pearson": float(stats.pearsonr(xa, xb)[0]) if len(pair) > 2 else float("nan"),
            "spearman": spearman_test(xa, xb)[0] if len(pair) > 2 else float("nan"),
            "kendall_tau": float(stats.kendalltau(xa, xb)[0]) if len(pair) > 2 else float("nan"),
            "mean_diff": float(np.mean(xb - xa)) if len(pair) else float("nan"),
            "top_overlap": len(top_a & top_b) / max(min(k, len(pair)), 1),
        })
    return pd.DataFrame(rows)


def ols(x: np.ndarray, y: np.ndarray, level: float = 0.95) -> dict:
    """Ordinary least squares y = X beta + e with classical standard errors.

    beta = (X'X)^-1 X'y; se = sqrt(diag(s^2 (X'X)^-1)) with s^2 = RSS / (n - p);
    interval beta +- t_{(1+level)/2, n-p} * se. ``x`` is (n, p) and includes the intercept.
    """
    n, k = x.shape
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ beta
    dof = n - k
    s2 = float(resid @ resid) / dof if dof > 0 else float("nan")
    cov = s2 * np.linalg.pinv(x.T @ x)
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    crit = stats.t.ppf((1 + level) / 2, dof) if dof > 0 else float("nan")
    with np.errstate(divide="ignore", invalid="ignore"):
        total = float(((y - y.mean()) ** 2).sum())
        r2 = 1 - float(resid @ resid) / total if n > 1 and total > 0 else float("nan")
        p = 2 * stats.t.sf(np.abs(beta / se), dof) if dof > 0 else np.full(k, np.nan)
    return {"beta": beta, "se": se, "lo": beta - crit * se, "hi": beta + crit * se,
            "p": p, "r2": r2, "n": n}


def word_features(decoded: Sequence[str], lang: str = "en") -> pd.DataFrame:
    """Per decoded token: its word (stripped, lower case), Zipf frequency and VADER valence.

    Zipf frequency = log10(occurrences per billion words) from ``wordfreq`` (0 when
    unknown); valence = VADER's compound score of the word alone, in [-1, 1]. Only
    alphabetic words are kept (``is_word``).

    Parameters
    ----------
    decoded : sequence of str
        The decoded tokens.
    lang : str, default="en"
        Language of the ``wordfreq`` frequencies.

    Returns
    -------
    DataFrame
        One row per token, in order: ``word, zipf, valence, is_word`` (an alphabetic word
        that ``wordfreq`` knows).
    """
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
    from wordfreq import zipf_frequency

    analyzer = SentimentIntensityAnalyzer()
    words = [str(t).strip().lower() for t in decoded]
    cache: dict[str, tuple[float, float]] = {}
    for w in set(words):
        if w.isalpha():
            cache[w] = (zipf_frequency(w, lang), analyzer.polarity_scores(w)["compound"])
    zipf = [cache.get(w, (0.0, 0.0))[0] for w in words]
    valence = [cache.get(w, (0.0, 0.0))[1] for w in words]
    is_word = [w in cache and cache[w][0] > 0 for w in words]
    return pd.DataFrame({"word": words, "zipf": zipf, "valence": valence, "is_word": is_word})


def frequency_bias(frame: pd.DataFrame, lang: str = "en", level: float = 0.95) -> pd.DataFrame:
    """Regression of score on log word frequency with a sentiment control, per prompt.

    score = a + b_freq * zipf + b_val * valence + e over the tokens that are known words
    (zipf = log10 frequency per billion words, ``wordfreq``; valence = VADER compound).
    ``b_freq`` > 0: frequent words are overvalued beyond what their sentiment explains;
    it is the score change per tenfold increase in word frequency.

    Parameters
    ----------
    frame : DataFrame
        A sweep table of one model.
    lang : str, default="en"
        Language of the word frequencies (:func:`word_features`).
    level : float, default=0.95
        Coverage of the coefficients' confidence intervals.

    Returns
    -------
    DataFrame
        ``prompt, n_words, coef_log_freq, coef_log_freq_lo, coef_log_freq_hi, p_log_freq,
        coef_valence, coef_valence_lo, coef_valence_hi, r2``.
    """
    rows = []
    known: dict[tuple, pd.DataFrame] = {}
    for prompt, part in frame.groupby("prompt", sort=False):
        decoded = tuple(part["decoded"])
        if decoded not in known:
            known[decoded] = word_features(list(decoded), lang)
        feats = known[decoded]
        keep = feats["is_word"].to_numpy()
        y = part["score"].to_numpy(dtype=np.float64)[keep]
        row = {"prompt": prompt, "n_words": int(keep.sum())}
        valence = feats.valence[keep].to_numpy()
        control = np.ptp(valence) > 0 if len(valence) else False  # no sentiment: no control
        if keep.sum() > 3:
            columns = [np.ones(keep.sum()), feats.zipf[keep].to_numpy()]
            x = np.column_stack(columns + [valence] if control else columns)
            fit = ols(x, y, level)
            nan = float("nan")
            row.update({
                "coef_log_freq": float(fit["beta"][1]), "coef_log_freq_lo": float(fit["lo"][1]),
                "coef_log_freq_hi": float(fit["hi"][1]), "p_log_freq": float(fit["p"][1]),
                "coef_valence": float(fit["beta"][2]) if control else nan,
                "coef_valence_lo": float(fit["lo"][2]) if control else nan,
                "coef_valence_hi": float(fit["hi"][2]) if control else nan,
                "r2": float(fit["r2"]),
            })
        rows.append(row)
    return pd.DataFrame(rows)
