"""The verdicts' command: ``python benchmarks/verdicts.py [docs/findings] [--check]``.

Applies the written rules (``findings/verdict_rules.py``) again to the findings already
written, measuring nothing; the claims and the command are in ``findings/verdicts.py``.
"""

import sys

from findings.verdicts import main  # the package findings/, found beside this file

if __name__ == "__main__":
    sys.exit(main())
