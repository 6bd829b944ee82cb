"""The findings rmlens exists to test, measured on real preference data (issue 49).

One command per finding: it runs its audits under ``--work`` (each an audit directory, so a
second invocation resumes and reuses what finished) and writes ``--out/NAME.json``: the
claim, its source, rmlens's figures with 95% intervals, a verdict by the written rules
(``findings/verdict_rules.py``; ``findings/verdicts.py`` names the figures each claim rests
on) and what it rests on. Each finding's module of ``findings/`` measures it
(``findings/__init__.py`` lists them); ``benchmarks/findings.py`` runs this command.
``docs/_ext/findings_page.py`` builds the documentation's findings page from those files.

- ``memorization-links``: what CM follows besides memory. Tried as a new user would on
  OASST pairs grouped by prompt, CM rose with the size of a pair's group (Spearman 0.32).
  Measured here with frozen MiniLM audits (brute force, so every
  grouping is read by the same estimator): the SQuALITY pairs grouped by question (a
  story's question), the same pairs each its own group (so that a pair's group-mates stay
  in the runs that hold it out), the same pairs with each question's cut to a random 1 to 9
  with three seeds (groups of related pairs whose sizes nothing in the pairs sets), and the
  HH-RLHF harmless pairs in random groups of 1 to 12 (groups that share nothing). Each link
  is CM's Spearman across pairs with a 95% bootstrap over questions
  (``rmlens.memorization.cm_links``; over the random groups for HH).
- ``memorization-margin``: CM's link with the margin, by kind of data: SQuALITY's ratings
  grouped by question and each pair alone, and ranked conversations from ``--ranked FILE``
  (a pairs file whose ``margin`` is the rank gap, grouped by ``--ranked-group``) where a
  reader has them; each kind gets its own verdict.
- ``memorization-users``: user-specific taste is memorized, not generalized (Verhoeven et
  al.). The SQuALITY pairs grouped by annotator (each run trains on two of the four): the
  mean CM of the pairs that another annotator judged the other way against the rest; and
  the same on synthetic pairs whose planted user taste is known (grouped by user). Each
  difference with a 95% bootstrap over questions (SQuALITY) or users (synthetic).
- ``memorization-modes``: the same SQuALITY pairs (grouped by question) audited frozen
  (MiniLM features, 50 brute-force runs) and fine-tuned (LoRA MiniLM at 256 tokens, the 5
  paired Gauss-Newton runs of ``finetune_paired.py``; about an hour on 2 cores): CM's
  Spearman between the two, the share of each one's top tenth in the other's, and CM's link
  with the margin in each, with 95% bootstraps over questions.
- ``memorization-trust``: how far the paired, one-checkpoint and frozen audits agree with
  brute-force retraining on real pairs: the 1,000 shortest HH pairs with LoRA MiniLM
  (``finetune_paired.py``'s ``minilm-hh-1000``), 25 brute-force runs as the reference
  (about 1.5 hours on 2 cores); CM's Spearman with the reference and the share of the
  ceiling that both audits' reliabilities allow, with 95% bootstraps over prompts.
- ``memorization-checkpoint``: how far one checkpoint's CM follows paired runs of the same
  pairs, the regimes matched (``--check-runs``) and not (the audit's own defaults), read
  from ``benchmarks/check_runs.py``'s results kept in ``benchmarks/results/``
  (``findings/checkpoint.py``).
- ``ex-vs-im``: explicit against implicit RMs under token and domain shifts (Razin et al.),
  with pretrained SmolLM2-135M-Instruct: ``rmlens generalize --task persona``, and
  ``rmlens generalize`` on HH pairs with the built-in token shifts and SQuALITY pairs as the
  domain shift, at 3 seeds each (10 to 20 minutes a seed and task); the accuracy each RM
  loses under each shift and IM's minus EX's, with 95% t-intervals over seeds.
- ``tokens``: Christian et al.'s four token findings (agreement, asymmetry, framing,
  frequency bias) on four SmolLM2 RMs that rmlens trains on HH and SQuALITY pairs
  (``findings/tokens.py``); writes four files, ``tokens-*.json``.
- ``overoptimization``: best-of-n against SQuALITY's human ratings, the one real gold here,
  and why its 3 answers per question cannot test overoptimization
  (``findings/overoptimization.py``).
- ``overoptimization-policy``: best-of-n on SmolLM2-135M-Instruct's own samples (64 to each
  of 200 held-out HH prompts) against a gold RM trained on the HH pairs, with frozen MiniLM
  proxies at two data sizes and three seeds, their ensembles, and whether each proxy's
  audit foretells its fall (``findings/policy_bon.py``); writes two files,
  ``overoptimization-policy.json`` and ``overoptimization-audit.json``.

    python benchmarks/findings.py NAME [--work findings-work] [--out docs/findings]
        [--ranked FILE [--ranked-group COLUMN]]
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

from findings.audits import memorization_modes, memorization_trust
from findings.checkpoint import checkpoint_regime
from findings.common import HH, SHARED, SQUALITY
from findings.ex_vs_im import ex_vs_im
from findings.memorization import memorization_links, memorization_margin, memorization_users
from findings.overoptimization import overoptimization
from findings.policy_bon import overoptimization_policy
from findings.tokens import tokens

FINDINGS = {"memorization-links": lambda a: memorization_links(a.work),
            "memorization-margin": lambda a: memorization_margin(a.work, a.ranked,
                                                                 a.ranked_group),
            "memorization-users": lambda a: memorization_users(a.work),
            "memorization-modes": lambda a: memorization_modes(a.work),
            "ex-vs-im": lambda a: ex_vs_im(a.work),
            "memorization-trust": lambda a: memorization_trust(a.work),
            "memorization-checkpoint": lambda a: checkpoint_regime(a.work),
            "tokens": lambda a: tokens(a.work, HH, SQUALITY),
            "overoptimization": lambda a: overoptimization(a.work, SQUALITY),
            "overoptimization-policy": lambda a: overoptimization_policy(a.work, HH)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=list(FINDINGS))
    root = Path(__file__).resolve().parents[2]  # the defaults hold from any folder
    parser.add_argument("--work", type=Path, default=root / "findings-work")
    parser.add_argument("--out", type=Path, default=root / "docs" / "findings")
    parser.add_argument("--ranked", type=Path, help="memorization-margin: a file of ranked "
                        "pairs, the margin their rank gap (the kind of data it adds)")
    parser.add_argument("--ranked-group", default="prompt",
                        help="memorization-margin: the column of --ranked's conversations")
    args = parser.parse_args()
    if not SQUALITY.exists() or not HH.exists():
        print(f"skipped: the shared data is absent ({SHARED})")
        return
    warnings.filterwarnings("ignore")
    found = FINDINGS[args.name](args)
    args.out.mkdir(parents=True, exist_ok=True)
    for one in found if isinstance(found, list) else [found]:  # a command may test several
        path = args.out / f"{one['name']}.json"
        path.write_text(json.dumps(one, indent=1) + "\n")
        print(json.dumps(one, indent=1))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
