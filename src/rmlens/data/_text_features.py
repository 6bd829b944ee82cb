"""The built-in pair features: text statistics, lexicon counts, sentiment, formatting.

Each entry of ``BUILTIN_RESPONSE`` is ``(name, description, source, func)`` with ``func``
taking the shared :class:`Texts` of all chosen and rejected responses; each entry of
``BUILTIN_PAIR`` takes the :class:`Pairs` context. They read only the pair table's text, so
they live in the bottom layer: ``attribution._features`` registers them all and
``sae._cards`` correlates latents with the response ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from rmlens.data import _lexicons as lex
from rmlens.data._text import EMOTIONS, Corpus, nrc_lexicon, syllables


class Texts:
    """Response texts and lazily computed shared statistics for the built-in features.

    Parameters
    ----------
    texts : Series of str
        The responses, one per row of the pair table.
    tokenizer : tokenizer or None, default=None
        What ``n_tokens`` counts with; None: words.
    """

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


def _flesch(t: Texts) -> np.ndarray:
    # Flesch (1948) reading ease: 206.835 - 1.015 words/sentence - 84.6 syllables/word
    syl = t.corpus.word_sum(t.corpus.vocab_map(syllables))
    words_per_sentence = t.share(t.n_words, t.n_sentences)
    return 206.835 - 1.015 * words_per_sentence - 84.6 * t.share(syl, t.n_words)


def _token_lengths(t: Texts) -> np.ndarray:
    enc = t.tokenizer(
        t.texts.tolist(), add_special_tokens=False, return_attention_mask=False, verbose=False
    )
    return np.array([len(ids) for ids in enc["input_ids"]], dtype=float)


def _emotion(name: str) -> Callable[[Texts], np.ndarray]:
    column = EMOTIONS.index(name)
    return lambda t: t.share(t.emotions[:, column], t.n_words)


def _first_person(t: Texts) -> np.ndarray:
    words = frozenset(lex.FIRST_PERSON)
    return t.share(t.corpus.word_sum(t.corpus.vocab_map(lambda w: w in words)), t.n_words)


BUILTIN_RESPONSE: list[tuple[str, str, str, Callable[[Texts], np.ndarray]]] = [
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


def _overlap(t: Texts) -> np.ndarray:
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
class Pairs:
    """What built-in pair features read: the pair table, prompt texts, both responses.

    Parameters
    ----------
    table : DataFrame
        The pair table.
    prompt : Series of str
        Each pair's prompt as text.
    texts : Texts
        Both responses: the chosen ones, then the rejected ones.
    """

    table: pd.DataFrame
    prompt: pd.Series
    texts: Texts


def _column(name: str, numeric: bool = False) -> Callable[[Pairs], pd.Series | None]:
    def get(p: Pairs) -> pd.Series | None:
        if name not in p.table.columns:
            return None
        return pd.to_numeric(p.table[name], errors="coerce") if numeric else p.table[name]

    return get


BUILTIN_PAIR: list[tuple[str, str, str, Callable[[Pairs], object]]] = [
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
