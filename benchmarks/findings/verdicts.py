"""Which figures each finding's claim rests on, and its verdict by the written rules.

``CLAIMS`` maps a finding's name to its claimed settings (``verdict_rules.Part``), read from
the finding as its command wrote it (``docs/findings/NAME.json``): the findings scripts call
``judged`` on what they are about to write, and this command applies the rules again to the
files already written, without measuring anything:

    python benchmarks/verdicts.py [docs/findings] [--check]

It rewrites each file whose verdict the rules change, with ``verdict_rule`` after
``verdict``: the rule that decided and each part's outcome. Where a file lacks an interval
that the rules need and the missing figure could change the verdict, the verdict stays as
the file gives it and ``verdict_rule`` names what is missing. ``--check`` writes nothing and
exits 1 where a file would change.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

from findings.verdict_rules import INCONCLUSIVE, NOT_TESTABLE, Part, decide, decide_by_data

FOLDER = Path(__file__).resolve().parents[2] / "docs" / "findings"
OVER_TOKENS = (
    "Each setting is one RM, one training seed, and its interval is over tokens: it leaves "
    "out the training noise, which the RMs trained on the same pairs at other seeds show to "
    "be large.")
CAVEATS = {
    "memorization-users": "A pair that another annotator judged the other way can hardly "
    "reach TG above 0.5 while that opposite judgment stays in training, so part of the plain "
    "difference is forced by construction: the verdict rests on the control, each such "
    "pair's CM from only the runs that did not train on its opposite judgment.",
    "tokens-agreement": "The controls (an untrained head, a head trained on shuffled "
    "sides) say where the disagreement comes from: the reading gives them. " + OVER_TOKENS,
    "tokens-asymmetry": "The controls (untrained heads, a head trained on shuffled sides) "
    "say whether the skew is learned: the reading gives them. " + OVER_TOKENS,
    "tokens-framing": OVER_TOKENS,
    "tokens-frequency": OVER_TOKENS,
}  # fmt: skip


def part(found: dict, key: str, sign: int, size: float | None = None,
         null: float = 0.0, data: str | None = None) -> Part:
    """The claimed setting of ``found``'s figure ``key``: its interval, and as its size the
    one given or else the figure's ``claimed`` value, if any. A figure the file lacks is a
    part without an interval."""
    fig = next((f for f in found["figures"] if f["key"] == key), None)
    if fig is None:
        return Part(key, sign, None, None, size, null, data)
    if size is None and fig.get("claimed") is not None:
        gap = fig["claimed"] - null
        size = abs(gap) if sign == 0 else sign * gap
    return Part(key, sign, fig["lo"], fig["hi"], size, null, data)


def keys(found: dict, test: Callable[[str], bool]) -> list[str]:
    return [f["key"] for f in found["figures"] if test(f["key"])]


def ex_vs_im(found: dict) -> list[Part]:
    """IM's drop minus EX's above 0 under every token shift; under the domain shift the
    paper finds IM not worse, and with no margin of equivalence only better (below 0) can
    be shown, so below 0 is the claimed side."""
    tokens = keys(found, lambda k: "token_shift" in k and k.endswith(":gap"))
    return [*(part(found, k, 1) for k in tokens), part(found, "hh:domain_shift:gap", -1)]


def memorization_links(found: dict) -> list[Part]:
    """CM rising with group size (cut groups, the source's size; random groups)."""
    return [part(found, k, 1) for k in ("thin_size", "random_size")]


MARGIN_DATA = {"question_margin": "ratings", "pair_margin": "ratings",
               "ranked_margin": "ranked conversations"}  # fmt: skip


def memorization_margin(found: dict) -> list[Part]:
    """CM rising with the margin, on each kind of data measured: ratings (grouped by
    question, the source's size; each pair alone) and ranked conversations (grouped by
    conversation, the source's size)."""
    return [part(found, k, 1, data=MARGIN_DATA[k])
            for k in keys(found, MARGIN_DATA.__contains__)]  # fmt: skip


def memorization_users(found: dict) -> list[Part]:
    """The conflict pairs' CM gap with their opposite judgments out of the runs that count
    (part of the plain gap is forced by construction), and the synthetic taste gaps."""
    return [part(found, k, 1) for k in ("conflict_control", "taste", "taste_against")]


def memorization_modes(found: dict) -> list[Part]:
    """Ranking alike: CM's Spearman reaching the ceiling sqrt(rel_frozen rel_tuned) that
    the audits' reliabilities (the table) allow. The top tenths shared above chance (one
    tenth). The margin followed alike: a claim of no difference, whose interval the file
    lacks (and which the rules could only find not reproduced or inconclusive)."""
    table = next((t for t in found["tables"] if "CM reliability" in t["columns"]), None)
    ceiling = None
    if table is not None:
        column = table["columns"].index("CM reliability")
        ceiling = round(math.sqrt(math.prod(float(r[column]) for r in table["rows"])), 3)
    ranking = part(found, "cm", 1, size=ceiling)
    if ceiling is None:
        ranking = Part("cm over the ceiling", 1, None, None)
    return [ranking, part(found, "top", 1, null=0.1),
            Part("frozen_margin minus tuned_margin", 0, None, None)]


def memorization_trust(found: dict) -> list[Part]:
    """Each audit ranking pairs as retraining does: its CM's share of the ceiling reaching
    1, all the agreement that both audits' noise allows."""
    return [part(found, f"share:{k}", 1, size=1.0) for k in ("paired", "checkpoint", "frozen")]


def memorization_checkpoint(found: dict) -> list[Part]:
    """With the regimes matched, the share of the check runs' reliability reaching the
    standing the audit quoted (each share figure's ``claimed``), on each data set."""
    names = [k.removesuffix(":matched") for k in keys(found, lambda k: k.endswith(":matched"))]
    return [part(found, f"{name}:matched-share", 1) for name in names]


def trained(key: str) -> bool:
    """A figure of the RMs the claim is about, not of a control (``null:``)."""
    return not key.startswith("null:")


def tokens_agreement(found: dict) -> list[Part]:
    """Two RMs' Spearman over the vocabulary below full agreement (1) by at least 0.1: the
    source gives no size, and rmlens reads "disagree" as a Spearman of 0.9 or less."""
    return [part(found, k, -1, size=0.1, null=1.0) for k in keys(found, trained)]


def tokens_asymmetry(found: dict) -> list[Part]:
    """Each RM's skew, either way: the source does not say which end is longer."""
    return [part(found, k, 0) for k in keys(found, trained)]


def tokens_positive(found: dict) -> list[Part]:
    """Each RM's (and prompt's) figure above 0."""
    return [part(found, k, 1) for k in keys(found, bool)]


def overoptimization(found: dict) -> list[Part]:
    """Best-of-3 cannot reach the KL where the gold peaks and falls: no figure tests it."""
    return []


def overoptimization_policy(found: dict) -> list[Part]:
    """The single proxies' gold falling from its peak at each data size, and each ensemble
    falling less than the single proxies it is made of."""
    return [part(found, k, 1) for k in keys(found, lambda k: k.startswith(("fall:single",
                                                                           "softening:")))]


def overoptimization_audit(found: dict) -> list[Part]:
    """A proxy's fall rising with the memorized share, and with the mean CM, of its pairs."""
    return [part(found, k, 1) for k in ("link:memorized", "link:cm")]


CLAIMS: dict[str, Callable[[dict], list[Part]]] = {
    "ex-vs-im": ex_vs_im, "memorization-links": memorization_links,
    "memorization-margin": memorization_margin, "memorization-users": memorization_users,
    "memorization-modes": memorization_modes,
    "memorization-trust": memorization_trust,
    "memorization-checkpoint": memorization_checkpoint,
    "tokens-agreement": tokens_agreement, "tokens-asymmetry": tokens_asymmetry,
    "tokens-framing": tokens_positive, "tokens-frequency": tokens_positive,
    "overoptimization": overoptimization,
    "overoptimization-policy": overoptimization_policy,
    "overoptimization-audit": overoptimization_audit,
}  # fmt: skip


def judged(found: dict) -> dict:
    """``found`` with its verdict by the rules and ``verdict_rule`` right after it (the
    other keys in their order). Where a missing interval could change the verdict, the
    verdict ``found`` gives stays (inconclusive where it gives none)."""
    if found["name"] not in CLAIMS:
        raise ValueError(f"finding {found['name']!r} has no claim in "
                         f"benchmarks/findings/verdicts.py CLAIMS; known: {', '.join(CLAIMS)}")
    parts = CLAIMS[found["name"]](found)
    verdict = decide(parts)
    record, label = verdict.record(), verdict.label
    if label is None:
        label = found.get("verdict") or INCONCLUSIVE
        missing = [p["figure"] for p in record["parts"] if p["outcome"] == "missing"]
        record = {**record, "rule": "kept", "note": f"the interval of {', '.join(missing)} "
                  "is missing and could change the verdict: it stays as measured before "
                  "the written rules"}  # fmt: skip
    if any(p.data is not None for p in parts):  # a claim that may hold on one kind only
        by_data = {**decide_by_data(parts), **dict.fromkeys(found.get("not_measured", {}),
                                                            NOT_TESTABLE)}  # fmt: skip
        record["by_data"] = {kind: said or INCONCLUSIVE for kind, said in by_data.items()}
    if found["name"] in CAVEATS:
        record["caveat"] = CAVEATS[found["name"]]
    out = {}
    for key, value in found.items():
        if key != "verdict_rule":
            out[key] = label if key == "verdict" else value
        if key == "verdict":
            out["verdict_rule"] = record
    return out if "verdict" in found else {**out, "verdict": label, "verdict_rule": record}


def text(found: dict) -> str:
    """A finding's file as the findings scripts write it."""
    return json.dumps(found, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, nargs="?", default=FOLDER)
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 where a file's verdict would change")
    args = parser.parse_args(argv)
    changed = 0
    for path in sorted(args.folder.glob("*.json")):
        found = json.loads(path.read_text())
        new = judged(found)
        rule = new["verdict_rule"]["rule"]
        print(f"{found['name']}: {found.get('verdict')} -> {new['verdict']} (rule: {rule})")
        if text(new) != path.read_text():
            changed += 1
            if not args.check:
                path.write_text(text(new))
    print(f"{changed} file(s) {'would change' if args.check else 'rewritten'}", file=sys.stderr)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
