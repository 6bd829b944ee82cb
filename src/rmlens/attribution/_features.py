"""Pair features and their registry (DESIGN.md section 3, attribution).

A *response* feature is computed on the chosen and on the rejected text and gives three
columns, ``<name>_chosen``, ``<name>_rejected`` and ``<name>_diff`` (chosen minus rejected).
A *pair* feature gives one column per pair. Every other column of the pair table is a
*metadata* feature (numeric, or categorical for text), except the excluded ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from rmlens.attribution import _lexicons as lex
from rmlens.attribution._config import DEFAULT_EXCLUDE
from rmlens.attribution._text import EMOTIONS, Corpus, nrc_lexicon, syllables

# Columns that are never features: pair identity and texts, and the audit's own outputs
# (``category`` is derived from TM/TG/CM; ``group`` repeats the grouping column).
NON_FEATURE_COLUMNS = frozenset(
    {"id", "prompt", "chosen", "rejected", "group", "category", "tm", "tg", "cm", "n_in", "n_out"}
)
_AUDIT_COLUMN = re.compile(r"^(tm|tg|cm)_")

# `mechanism` is the label-deciding mechanism planted by `rmlens data synth`: the ground truth
# that attribution is meant to recover. As a feature it would leak the answer (a regressor
# could explain CM by the planted label instead of by observable pair properties).


@dataclass(frozen=True)
class Feature:
    """One registered feature.

    Attributes
    ----------
    name : str
    description : str
        One line.
    source : str
        Where the feature comes from (package, lexicon, or "user").
    kind : {"response", "pair"}
        Response features give ``_chosen``, ``_rejected`` and ``_diff`` columns.
    func : callable
        Response: ``func(texts: pd.Series) -> array (n_texts,)``.
        Pair: ``func(pairs: pd.DataFrame) -> array (n_pairs,)`` (categorical allowed).
    builtin : bool
        Built-in response functions take the shared text context instead of a Series.
    """

    name: str
    description: str
    source: str
    kind: str
    func: Callable
    builtin: bool = False


_REGISTRY: dict[str, Feature] = {}


def register_feature(
    name: str,
    func: Callable,
    description: str,
    source: str = "user",
    *,
    kind: str = "response",
    replace: bool = False,
) -> Feature:
    """Add a feature computed by ``func`` to every later ``pair_features`` call.

    Parameters
    ----------
    name : str
        Column stem: a response feature gives ``<name>_chosen``, ``<name>_rejected``,
        ``<name>_diff``; a pair feature gives ``<name>``.
    func : callable
        ``kind="response"``: takes a ``pd.Series`` of response texts, returns numbers
        of the same length. ``kind="pair"``: takes the pair table, returns one value per pair.
    description : str
        One line, shown by ``rmlens attribute --list-features``.
    source : str, default="user"
    kind : {"response", "pair"}, default="response"
    replace : bool, default=False
        Replace a feature of the same name instead of raising.

    Returns
    -------
    Feature

    Examples
    --------
    >>> from rmlens.attribution import register_feature, unregister_feature
    >>> f = register_feature("n_digits", lambda s: s.str.count(r"\\d"), "digits in the text")
    >>> f.kind
    'response'
    >>> unregister_feature("n_digits")
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"feature name must be an identifier (letters, digits, _), got {name!r}")
    if kind not in ("response", "pair"):
        raise ValueError(f"feature kind must be 'response' or 'pair', got {kind!r}")
    if not callable(func):
        raise TypeError(f"feature {name!r}: func must be callable, got {type(func).__name__}")
    if name in _REGISTRY and not replace:
        raise ValueError(f"feature {name!r} is already registered; pass replace=True")
    feature = Feature(name, " ".join(description.split()), source, kind, func)
    _REGISTRY[name] = feature
    return feature


def unregister_feature(name: str) -> None:
    """Remove a registered feature (built-in ones too)."""
    if name not in _REGISTRY:
        raise KeyError(f"no feature named {name!r}; see list_features()")
    del _REGISTRY[name]


def list_features() -> pd.DataFrame:
    """The registered features: ``name, kind, columns, description, source``.

    Metadata features (every other column of the pair table) are listed as one row.
    """
    rows = []
    for f in _REGISTRY.values():
        cols = f"{f.name}_chosen, _rejected, _diff" if f.kind == "response" else f.name
        rows.append((f.name, f.kind, cols, f.description, f.source))
    rows.append((
        "<metadata>", "metadata", "<column>",
        "every other pair-table column: numeric as is, text as a category; not id/prompt/"
        "chosen/rejected, the audit's outputs, or 'mechanism' (planted ground truth: leaks); "
        "attribution leaves out identifier-like columns (the grouping column, *_id, one value "
        "per group, free text) unless named in --features",
        "pair table",
    ))
    return pd.DataFrame(rows, columns=["name", "kind", "columns", "description", "source"])


class _Texts:
    """Response texts and lazily computed shared statistics for the built-in features."""

    def __init__(self, texts: pd.Series, tokenizer=None):
        self.texts = texts
        self.tokenizer = tokenizer

    @cached_property
    def corpus(self) -> Corpus:
        return Corpus(self.texts.tolist())

    @property
    def n_words(self) -> np.ndarray:
        return self.corpus.n_words

    @cached_property
    def n_sentences(self) -> np.ndarray:
        start, _ = self.corpus.sentences
        return np.bincount(self.corpus.doc[start], minlength=self.corpus.n).astype(float)

    @cached_property
    def acts(self) -> tuple[np.ndarray, np.ndarray]:
        c = self.corpus
        start, question = c.sentences
        first_word = c.vocab[c.lc[start]] if len(start) else np.zeros(0, dtype=object)
        imperative = np.fromiter(
            (w in lex.IMPERATIVE_VERBS for w in first_word), dtype=bool, count=len(start)
        ) & ~question
        doc = c.doc[start]
        return c.per_text(doc, question.astype(float)), c.per_text(doc, imperative.astype(float))

    @cached_property
    def emotions(self) -> np.ndarray:
        nrc = nrc_lexicon()
        flags = np.array([[e in nrc.get(w, ()) for e in EMOTIONS] for w in self.corpus.vocab],
                         dtype=bool).reshape(-1, len(EMOTIONS))
        return self.corpus.word_flags(flags)

    def share(self, count: np.ndarray, total: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(total > 0, count / np.where(total > 0, total, 1), np.nan)

    def phrases(self, words: Iterable[str], *, at_start: bool = False) -> np.ndarray:
        return self.corpus.phrase_counts(words, at_start=at_start)


def _flesch(t: _Texts) -> np.ndarray:
    # Flesch (1948) reading ease: 206.835 - 1.015 words/sentence - 84.6 syllables/word
    syl = t.corpus.word_sum(t.corpus.vocab_map(syllables))
    words_per_sentence = t.share(t.n_words, t.n_sentences)
    return 206.835 - 1.015 * words_per_sentence - 84.6 * t.share(syl, t.n_words)


def _token_lengths(t: _Texts) -> np.ndarray:
    enc = t.tokenizer(
        t.texts.tolist(), add_special_tokens=False, return_attention_mask=False, verbose=False
    )
    return np.array([len(ids) for ids in enc["input_ids"]], dtype=float)


def _emotion(name: str) -> Callable[[_Texts], np.ndarray]:
    column = EMOTIONS.index(name)
    return lambda t: t.share(t.emotions[:, column], t.n_words)


def _first_person(t: _Texts) -> np.ndarray:
    words = frozenset(lex.FIRST_PERSON)
    return t.share(t.corpus.word_sum(t.corpus.vocab_map(lambda w: w in words)), t.n_words)


_BUILTIN_RESPONSE: list[tuple[str, str, str, Callable[[_Texts], np.ndarray]]] = [
    ("len_chars", "characters", "rmlens",
     lambda t: t.texts.str.len().to_numpy(dtype=float)),
    ("len_words", "whitespace-separated words", "rmlens",
     lambda t: np.fromiter((len(s.split()) for s in t.texts), dtype=float, count=len(t.texts))),
    ("len_tokens", "tokens of the backbone's tokenizer (no special tokens); needs a tokenizer",
     "transformers tokenizer", _token_lengths),
    ("n_sentences", "sentences (runs of words ended by . ! ? or a newline)", "rmlens",
     lambda t: t.n_sentences),
    ("words_per_sentence", "mean words per sentence", "rmlens",
     lambda t: t.share(t.n_words, t.n_sentences)),
    ("chars_per_word", "mean characters per word", "rmlens",
     lambda t: t.share(t.corpus.word_sum(t.corpus.vocab_map(len)), t.n_words)),
    ("type_token_ratio", "distinct lowercase words / words", "rmlens",
     lambda t: t.share(t.corpus.types(), t.n_words)),
    ("flesch", "Flesch reading ease (higher = easier); syllables by pyphen en_US hyphenation",
     "pyphen", _flesch),
    ("refusal", "1 if a refusal phrase occurs (\"I can't help\", \"I'm sorry, but\", ...)",
     "rmlens lexicon", lambda t: (t.phrases(lex.REFUSAL) > 0).astype(float)),
    ("compliance", "1 if it opens with \"Sure\"/\"Certainly\"/... or says \"here is\", "
     "\"happy to help\", ...", "rmlens lexicon",
     lambda t: ((t.phrases(lex.COMPLIANCE_OPENERS, at_start=True)
                 + t.phrases(lex.COMPLIANCE)) > 0).astype(float)),
    ("please", "politeness: \"please\", \"kindly\" (count)", "rmlens lexicon",
     lambda t: t.phrases(lex.PLEASE)),
    ("thanks", "politeness: thanks, appreciation (count)", "rmlens lexicon",
     lambda t: t.phrases(lex.THANKS)),
    ("apology", "politeness: apologies, \"sorry\" (count)", "rmlens lexicon",
     lambda t: t.phrases(lex.APOLOGY)),
    ("hedges", "hedges: \"perhaps\", \"might\", \"I think\", \"it depends\" (count)",
     "rmlens lexicon", lambda t: t.phrases(lex.HEDGES)),
    ("anthropomorphic", "first-person feelings and experiences: \"I feel\", \"I love\", "
     "\"my favorite\" (count)", "rmlens lexicon", lambda t: t.phrases(lex.ANTHROPOMORPHIC)),
    ("ai_self_reference", "the model names itself a machine: \"as an AI\", \"I don't have "
     "feelings\" (count)", "rmlens lexicon", lambda t: t.phrases(lex.AI_SELF_REFERENCE)),
    ("first_person", "share of words that are I/me/my/mine/myself (and contractions)",
     "rmlens lexicon", _first_person),
    ("praise", "sycophancy, praise of the user: \"great question\", \"good point\" (count)",
     "rmlens lexicon", lambda t: t.phrases(lex.PRAISE)),
    ("agreement", "sycophancy, agreement with the user: \"you're right\", \"I agree\" (count)",
     "rmlens lexicon", lambda t: t.phrases(lex.AGREEMENT)),
    ("sentiment", "VADER compound sentiment in [-1, 1] (lexicon and rules of the package)",
     "vaderSentiment", lambda t: t.corpus.vader_compound()),
    *[(f"emotion_{e}", f"share of words in the NRC '{e}' list", "NRC Emotion Lexicon (nrclex)",
       _emotion(e)) for e in EMOTIONS],
    ("question_share", "dialog act: share of sentences that are questions (end with ?)",
     "rmlens", lambda t: t.share(t.acts[0], t.n_sentences)),
    ("imperative_share", "dialog act: share of sentences that open with an imperative verb",
     "rmlens lexicon", lambda t: t.share(t.acts[1], t.n_sentences)),
    ("statement_share", "dialog act: share of sentences that are neither of the above",
     "rmlens", lambda t: t.share(t.n_sentences - t.acts[0] - t.acts[1], t.n_sentences)),
    ("list_items", "formatting: bulleted or numbered list items", "rmlens",
     lambda t: t.corpus.boundary_counts(".)-*+•")),
    ("headers", "formatting: markdown headers", "rmlens",
     lambda t: t.corpus.boundary_counts("#")),
    ("code_blocks", "formatting: fenced code blocks", "rmlens",
     lambda t: np.floor(t.corpus.count("```") / 2)),
    ("bold", "formatting: **bold** spans", "rmlens",
     lambda t: np.floor(t.corpus.count("**") / 2)),
    ("newlines", "formatting: line breaks", "rmlens", lambda t: t.corpus.count("\n")),
    ("exclamations", "exclamation marks", "rmlens", lambda t: t.corpus.count("!")),
]


def _overlap(t: _Texts) -> np.ndarray:
    c = t.corpus
    n, vocab = c.n // 2, max(len(c.vocab), 1)
    key = c.doc_word_keys
    doc, word = key // vocab, key % vocab
    chosen = doc < n
    kc = doc[chosen] * vocab + word[chosen]
    kr = (doc[~chosen] - n) * vocab + word[~chosen]
    inter = np.bincount(np.intersect1d(kc, kr, assume_unique=True) // vocab, minlength=n)
    union = np.bincount(kc // vocab, minlength=n) + np.bincount(kr // vocab, minlength=n) - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / np.where(union > 0, union, 1), np.nan)


@dataclass
class _Pairs:
    """What built-in pair features read: the pair table, prompt texts, both responses."""

    table: pd.DataFrame
    prompt: pd.Series
    texts: _Texts


def _column(name: str, numeric: bool = False) -> Callable[[_Pairs], pd.Series | None]:
    def get(p: _Pairs) -> pd.Series | None:
        if name not in p.table.columns:
            return None
        return pd.to_numeric(p.table[name], errors="coerce") if numeric else p.table[name]

    return get


_BUILTIN_PAIR: list[tuple[str, str, str, Callable[[_Pairs], object]]] = [
    ("margin", "preference strength from the pair table (rating difference, rank gap)",
     "pair table", _column("margin", numeric=True)),
    ("chosen_model", "system that wrote the chosen response (category)", "pair table",
     _column("chosen_model")),
    ("rejected_model", "system that wrote the rejected response (category)", "pair table",
     _column("rejected_model")),
    ("len_chars_prompt", "characters of the prompt", "rmlens", lambda p: p.prompt.str.len()),
    ("len_words_prompt", "whitespace-separated words of the prompt", "rmlens",
     lambda p: p.prompt.map(lambda s: len(s.split()))),
    ("overlap_jaccard", "Jaccard overlap of the chosen and rejected word sets", "rmlens",
     lambda p: _overlap(p.texts)),
]


def _install_builtins() -> None:
    for name, desc, source, func in _BUILTIN_RESPONSE:
        _REGISTRY[name] = Feature(name, desc, source, "response", func, builtin=True)
    for name, desc, source, func in _BUILTIN_PAIR:
        _REGISTRY[name] = Feature(name, desc, source, "pair", func, builtin=True)


_install_builtins()
_BUILTIN_PAIR_COLUMNS = frozenset(name for name, *_ in _BUILTIN_PAIR)


def _as_text(values: pd.Series) -> pd.Series:
    if values.map(lambda v: isinstance(v, str)).all():
        return values.astype(object)
    from rmlens.data import to_text

    def text(v) -> str:
        if isinstance(v, str):
            return v
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return ""
        return to_text(v)

    return values.map(text).astype(object)


def _as_feature(values, n: int, name: str) -> pd.Series:
    s = pd.Series(values).reset_index(drop=True)
    if len(s) != n:
        raise ValueError(f"feature {name!r} returned {len(s)} values for {n} rows")
    if pd.api.types.is_bool_dtype(s.dtype):
        return s.astype(float)
    if isinstance(s.dtype, pd.CategoricalDtype):
        return s
    if pd.api.types.is_numeric_dtype(s.dtype):
        return s.astype(float)
    return s.map(lambda v: np.nan if pd.isna(v) else str(v)).astype("category")


def _metadata(pairs: pd.DataFrame, exclude: set[str]) -> tuple[dict[str, pd.Series], dict]:
    out, skipped = {}, {}
    for col in pairs.columns:
        if (not isinstance(col, str) or col in NON_FEATURE_COLUMNS or col in exclude
                or _AUDIT_COLUMN.match(col)
                or col in _BUILTIN_PAIR_COLUMNS):
            continue
        s = pairs[col].reset_index(drop=True)
        if pd.api.types.is_bool_dtype(s.dtype) or pd.api.types.is_numeric_dtype(s.dtype):
            out[col] = s.astype(float)
        elif pd.api.types.is_datetime64_any_dtype(s.dtype):
            skipped[col] = "datetime column"
        elif s.map(lambda v: v is None or isinstance(v, (str, int, float, bool, np.generic))).all():
            out[col] = _as_feature(s, len(s), col)
        else:
            skipped[col] = "values are not scalars (lists, dicts or arrays)"
    return out, skipped


def pair_features(
    pairs: pd.DataFrame,
    *,
    tokenizer=None,
    extra: Mapping[str, Callable] | None = None,
    features: Sequence[str] | None = None,
    exclude: Sequence[str] = DEFAULT_EXCLUDE,
    metadata: bool = True,
) -> pd.DataFrame:
    """Features of each preference pair, vectorized over all pairs.

    Parameters
    ----------
    pairs : DataFrame, shape (n_pairs, ...)
        Pair table (``prompt``, ``chosen``, ``rejected`` and any metadata), or the
        memorization table of an experiment directory.
    tokenizer : transformers tokenizer, optional
        Gives ``len_tokens_*``; skipped without one.
    extra : mapping of str to callable, optional
        More response features for this call only: ``{name: func(texts) -> numbers}``.
    features : sequence of str, optional
        Registered feature names to compute (default all); metadata columns come on top.
    exclude : sequence of str, default=("mechanism",)
        Pair-table columns never used as features. ``mechanism`` (planted by
        ``rmlens data synth``) names what decided the label: it is the ground truth that
        attribution should recover, so as a feature it would leak.
    metadata : bool, default=True
        Add every other pair-table column as a feature.

    Returns
    -------
    DataFrame, shape (n_pairs, n_columns)
        Same index as ``pairs``; numeric columns as float, categories as ``category``.
        ``.attrs["skipped"]`` maps each feature or column left out to the reason.

    Examples
    --------
    >>> import pandas as pd
    >>> from rmlens.attribution import pair_features
    >>> pairs = pd.DataFrame({"prompt": ["Hi?"], "chosen": ["Sure, here it is."],
    ...                       "rejected": ["I can't help with that."]})
    >>> f = pair_features(pairs)
    >>> f[["refusal_chosen", "refusal_rejected", "refusal_diff"]].iloc[0].tolist()
    [0.0, 1.0, -1.0]
    """
    for field in ("prompt", "chosen", "rejected"):
        if field not in pairs.columns:
            from rmlens._errors import InputError

            raise InputError(f"pair table: column '{field}' is missing (found {list(pairs)})")
    n = len(pairs)
    names = list(_REGISTRY) if features is None else list(features)
    unknown = [f for f in names if f not in _REGISTRY]
    if unknown:
        raise ValueError(f"unknown features {unknown}; see list_features()")
    chosen = _as_text(pairs["chosen"].reset_index(drop=True))
    rejected = _as_text(pairs["rejected"].reset_index(drop=True))
    prompt = _as_text(pairs["prompt"].reset_index(drop=True))
    table = pairs.reset_index(drop=True)
    both = _Texts(pd.concat([chosen, rejected], ignore_index=True), tokenizer)
    context = _Pairs(table, prompt, both)
    skipped: dict[str, str] = {}
    pair_cols: dict[str, pd.Series] = {}
    resp_cols: dict[str, pd.Series] = {}

    def add_response(name: str, values) -> None:
        v = pd.Series(np.asarray(values, dtype=float))
        if len(v) != 2 * n:
            raise ValueError(f"feature {name!r} returned {len(v)} values for {2 * n} texts")
        c, r = v.iloc[:n].reset_index(drop=True), v.iloc[n:].reset_index(drop=True)
        resp_cols.update({f"{name}_chosen": c, f"{name}_rejected": r, f"{name}_diff": c - r})

    for name in names:
        f = _REGISTRY[name]
        if name == "len_tokens" and tokenizer is None:
            skipped[name] = "no tokenizer given"
            continue
        if f.kind == "response":
            try:
                values = f.func(both) if f.builtin else f.func(both.texts.copy())
            except ModuleNotFoundError as err:  # an optional lexicon package is missing
                skipped[name] = str(err)
                continue
            add_response(name, values)
        else:
            values = f.func(context) if f.builtin else f.func(table.copy())
            if values is None or pd.Series(values).isna().all():
                skipped[name] = "column absent or empty"
                continue
            pair_cols[name] = _as_feature(values, n, name)
    for name, func in (extra or {}).items():
        add_response(name, func(both.texts.copy()))
    meta, meta_skipped = _metadata(pairs, set(exclude)) if metadata else ({}, {})
    skipped.update(meta_skipped)
    skipped.update({c: "excluded" for c in exclude if c in pairs.columns})
    out = pd.DataFrame({**pair_cols, **meta, **resp_cols})
    out.index = pairs.index
    out.attrs["skipped"] = skipped
    return out
