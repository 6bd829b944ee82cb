"""The findings' command: ``python benchmarks/findings.py NAME [--work DIR] [--out DIR]``.

Each finding is measured by a module of ``findings/`` (one per line of work) and judged by
its written rules (``findings/verdict_rules.py``); ``findings/run.py`` lists the findings
and holds this command.
"""

from findings.run import main  # the package findings/, found beside this file

if __name__ == "__main__":
    main()
