"""Helpers the benchmarks and the findings share; none of them is a command.

- ``flops``: the machine's matmul peak and a fine-tuning step's model FLOPs;
- ``pairs``: the shared HH pairs and the shortest that fit a backbone;
- ``cm``: CM per pair from run matrices, and its split-half reliability;
- ``reference_store``: brute-force references committed under ``benchmarks/references/``;
- ``export_readers``: how each consumer of an exported RM reads it
  (``rewardbench_export.py``'s helper modes, run in other venvs).

Scripts in ``benchmarks/`` import them as ``helpers.NAME`` (their folder is on ``sys.path``).
"""
