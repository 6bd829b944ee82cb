"""rmlens.data: the canonical pair table, loaders, validation, synthetic data (DESIGN.md 1)."""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_synth_config": ["MECHANISMS", "SynthConfig"],
        "_candidates_config": ["CandidatesConfig"],
        "_candidates": [
            "candidates_from_pairs", "candidates_from_policy", "generate_candidates",
            "load_candidates",
        ],
        "_dedupe": ["DEDUPE", "dedupe_pairs", "first_copies", "join_groups"],
        "converters": ["convert", "converter_names"],
        "_load": ["find_problems", "load_pairs", "load_rankings", "save_pairs", "validate_pairs"],
        "_schema": ["CORE_COLUMNS", "derive_id", "to_text", "word_counts"],
        "_summary": ["inspect_pairs", "summarize", "duplicates_across_groups"],
        "_synth": ["synthesize"],
        "_fingerprint": ["FINGERPRINT_COLUMNS", "data_sha1"],
        "_text_features": ["BUILTIN_PAIR", "BUILTIN_RESPONSE", "Pairs", "Texts"],
    },
)
