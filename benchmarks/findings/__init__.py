"""The findings rmlens exists to test, one module per line of work; each writes
``docs/findings/NAME.json`` (``python benchmarks/findings.py NAME``, from ``run.py``).

- ``memorization``: memorization-links, memorization-margin, memorization-users;
- ``audits``: memorization-modes, memorization-trust (how far the audits agree);
- ``checkpoint``: memorization-checkpoint;
- ``ex_vs_im``: ex-vs-im;
- ``tokens``: the four tokens-* findings;
- ``overoptimization``: overoptimization (SQuALITY's human gold);
- ``policy_bon``: overoptimization-policy, overoptimization-audit (a policy's samples);
- ``verdict_rules`` and ``verdicts``: the written rules, and the figures each claim rests
  on (``python benchmarks/verdicts.py``);
- ``common``: the shared data and the frozen audit the memorization findings run.
"""
