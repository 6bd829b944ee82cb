"""Read a dataset in its native layout: a file, a folder, a ``datasets`` object or a hub id.

Offline, a hub id fails at once with one line that says so (no retries for half a minute).
"""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from rmlens._errors import InputError
from rmlens.data.converters._registry import Converter

DATA_SUFFIXES = (
    ".jsonl",
    ".jsonl.gz",
    ".json",
    ".json.gz",
    ".ndjson",
    ".csv",
    ".csv.gz",
    ".tsv",
    ".parquet",
    ".pq",
)
HF_MARKERS = ("dataset_dict.json", "dataset_info.json", "state.json")
OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
PROBE_TIMEOUT_S = 3.0
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _report(message: str) -> None:
    raise InputError(message)


def data_files(folder: Path, split: str | None = None) -> list[Path]:
    """Every data file under ``folder`` (recursively, hidden ones and reports left out);
    with ``split``, only those whose name starts with it (``train.jsonl``, ``train-0.parquet``).
    """
    found = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        name = path.name.lower()
        if name.endswith(".report.json") or not name.endswith(DATA_SUFFIXES):
            continue
        if split is None or name.startswith(split.lower()):
            found.append(path)
    return found


def read_sources(converter: Converter, source: Any, split: str | None, options: Any) -> list:
    """The records of ``source`` as a list of :class:`~rmlens.data._loaders.Records`."""
    # lazy: numpy, pandas load only when this runs (the command line imports this module)
    from rmlens.data._loaders import read_records

    text = set(converter.text_fields)
    if not isinstance(source, (str, os.PathLike)):
        if split is None and isinstance(source, dict):  # a DatasetDict
            split = next((s for s in converter.splits if s in source), None)
        return [read_records(source, split=split, report=_report, text_fields=text)]
    path = Path(source)
    if path.is_file():
        return [read_records(path, report=_report, text_fields=text)]
    if path.is_dir():
        if any((path / m).exists() for m in HF_MARKERS):
            chosen = split or _default_split(converter, path)
            return [read_records(path, split=chosen, report=_report)]
        finder = converter.folder_files or (
            lambda folder, split, options: data_files(folder, split)
        )
        files = finder(path, split, options)
        if not files:
            raise InputError(
                f"{source}: no {converter.name} data files found in this folder"
                + (f" for split {split!r}" if split else "")
            )
        return [read_records(f, report=_report, text_fields=text) for f in files]
    name = str(source)
    if name == converter.name:
        name = converter.hub_id_for(options)
    if not HUB_ID.match(name) or name.lower().endswith(DATA_SUFFIXES):
        raise InputError(f"{source}: no such file or folder")
    return [_read_hub(converter, name, split, options)]


def _default_split(converter: Converter, path: Path) -> str | None:
    marker = path / "dataset_dict.json"
    if not marker.exists():
        return None
    splits = json.loads(marker.read_text()).get("splits", [])
    return next((s for s in converter.splits if s in splits), None)


def offline_mode() -> bool:
    """Whether the user switched the Hugging Face libraries to their cache only."""
    return any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on") for v in OFFLINE_VARS
    )


def hub_reachable() -> tuple[bool, str]:
    """Whether the Hugging Face hub answers a connection, and why not (one short phrase)."""
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    url = urlparse(endpoint)
    host = url.hostname or "huggingface.co"
    port = url.port or (80 if url.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            return True, ""
    except OSError as err:
        return False, f"cannot reach {host}:{port}: {err.strerror or type(err).__name__}"


def _read_hub(converter: Converter, hub_id: str, split: str | None, options: Any):
    # lazy: numpy, pandas load only when this runs (the command line imports this module)
    from rmlens.data._loaders import read_records

    offline = offline_mode()
    if not offline:
        ok, why = hub_reachable()
        if not ok:
            raise InputError(
                f"{hub_id}: not a local file or folder, and this machine is offline for the "
                f"Hugging Face hub ({why}); download the dataset where the hub is reachable "
                "and pass the local file or folder as SOURCE"
            )
    args = converter.hub_args(options)
    try:
        import datasets

        data = datasets.load_dataset(hub_id, **args)
    except Exception as err:  # gated, missing, network: datasets raises many types
        first = str(err).strip().splitlines()[0][:200] if str(err).strip() else ""
        if offline:
            raise InputError(
                f"{hub_id}: not a local file or folder, and offline mode is set "
                f"(HF_HUB_OFFLINE) but the dataset is not in the local cache ({first})"
            ) from None
        raise InputError(
            f"{hub_id}: loading it from the Hugging Face hub failed "
            f"({type(err).__name__}: {first}); for a gated dataset accept its terms and log in"
        ) from None
    if isinstance(data, dict) and split is None:
        split = next((s for s in converter.splits if s in data), None)
    records = read_records(data, split=split, report=_report)
    where = "".join(f" {k}={v}" for k, v in args.items())
    records.name = records.name.replace("<Dataset>", f"{hub_id}{where}")
    return records
