"""Bad input on the command line (issue 31, item 8): each case gives one clear line (exit 2),
or a warning and exit 0 where rmlens can go on, never a traceback.

- ``--max-length`` above the model's limit: lowered to the limit, with a warning;
- a pair whose chosen and rejected are the same text: left out at load time, with its own
  warning (not counted as "identical after truncation");
- an unknown ``--model`` while the hub cannot be reached: refused at once, no hub retries;
- a CSV that does not parse: the message suggests ``--sep``; a semicolon CSV is read as one.
"""

from __future__ import annotations

import json
import socket
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest

from conftest import run_cli
from rmlens._errors import InputError, RmlensWarning

UNKNOWN = "nosuch/model-xyz"


def write_pairs(path: Path, n: int = 24, *, same: tuple[int, ...] = (), long: bool = False):
    """``n`` pairs in 4 user groups, ids p0, p1, ...; the pairs in ``same`` have chosen ==
    rejected; ``long`` prompts run past the tiny encoder's 128 positions."""
    prompt = "what is the thing " * (40 if long else 1)
    rows = []
    for i in range(n):
        chosen = "good answer " * (i % 3 + 1)
        rejected = chosen if i in same else "bad answer"
        rows.append({"id": f"p{i}", "prompt": f"{prompt}{i}", "chosen": chosen,
                     "rejected": rejected, "user_id": f"u{i % 4}"})  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def memorize(data: Path, out: Path, model, *extra) -> tuple:
    return ["memorize", "--data", data, "--out", out, "--model", model, "--runs", "2",
            "--quiet", "--no-report", *extra]  # fmt: skip


def errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def no_traceback(result) -> None:
    assert "Traceback" not in result.output and "internal error" not in result.output


# --- --max-length above the model's limit ---------------------------------------------------


def test_max_length_above_the_model_limit_is_clamped_with_a_warning(
    tiny_encoder_dir, tmp_path, monkeypatch
):
    """The tiny encoder has 128 positions; its prompts here are longer. Before: an 84-line
    traceback from inside BERT ("internal error ... please report it")."""
    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / "cache"))
    data = write_pairs(tmp_path / "long.jsonl", long=True)
    args = memorize(data, tmp_path / "o", tiny_encoder_dir, "--max-length", "100000000")
    result = run_cli(args)
    no_traceback(result)
    assert result.exit_code == 0, result.output
    assert "warning: --max-length 100000000 is above the model's limit 128: using 128" in (
        result.stderr.splitlines()
    )
    assert (tmp_path / "o" / "memorization.parquet").exists()


def test_the_default_max_length_stays_within_the_model(tiny_encoder_dir, tmp_path, monkeypatch):
    """Without --max-length, the default is the model's 128 positions (no warning about the
    limit): long texts are truncated, not a crash, and the cut pairs are warned about."""
    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / "cache"))
    data = write_pairs(tmp_path / "long.jsonl", long=True)
    result = run_cli(memorize(data, tmp_path / "o", tiny_encoder_dir))
    no_traceback(result)
    assert result.exit_code == 0, result.output
    assert "above the model's limit" not in result.stderr
    assert "pairs cut to --max-length 128:" in result.stderr


def test_backbones_lower_max_length_to_the_model_limit(tiny_encoder_dir, tiny_causal_dir):
    from rmlens.backbones import load_backbone
    from rmlens.rewards._base_model import load_causal_lm

    with pytest.warns(RmlensWarning, match=r"^`max_length` 100000000 is above the model's "
                      r"limit 128: using 128$"):  # fmt: skip
        assert load_backbone(str(tiny_encoder_dir), max_length=10**8).max_length == 128
    with warnings.catch_warnings():
        warnings.simplefilter("error", RmlensWarning)
        assert load_backbone(str(tiny_encoder_dir)).max_length == 128
        assert load_backbone(str(tiny_encoder_dir), max_length=64).max_length == 64
    # the implicit RM's causal LM (256 positions) gets the same rule
    with pytest.warns(RmlensWarning, match="limit 256: using 256"):
        assert load_causal_lm(str(tiny_causal_dir), max_length=10**8).max_length == 256


def test_model_limit_reads_the_position_count():
    from transformers import BertConfig, GPT2Config, RobertaConfig, T5Config

    from rmlens.backbones._load import model_limit

    assert model_limit(BertConfig(max_position_embeddings=128)) == 128
    assert model_limit(GPT2Config(n_positions=1024)) == 1024
    assert model_limit(RobertaConfig(max_position_embeddings=514, pad_token_id=1)) == 512
    assert model_limit(T5Config()) is None  # relative positions: no stated limit
    assert model_limit(None) is None


# --- chosen == rejected ---------------------------------------------------------------------


def test_a_pair_with_chosen_equal_to_rejected_gets_its_own_warning(
    tiny_encoder_dir, tmp_path, monkeypatch
):
    """Before: exit 0 with "1 pairs dropped: chosen == rejected after truncation" on stdout."""
    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / "cache"))
    data = write_pairs(tmp_path / "x.jsonl", same=(7,))
    result = run_cli(memorize(data, tmp_path / "o", tiny_encoder_dir))
    no_traceback(result)
    assert result.exit_code == 0, result.output
    warned = [line for line in result.stderr.splitlines() if "same text" in line]
    assert warned == [f"warning: {data} line 8 (id p7): chosen and rejected are the same text: "
                      "left out"]  # fmt: skip
    assert "after truncation" not in result.output
    table = pd.read_parquet(tmp_path / "o" / "memorization.parquet")
    assert len(table) == 23 and "p7" not in set(table["id"])


def test_several_such_pairs_are_counted_in_one_warning(tmp_path):
    from rmlens.data import load_pairs

    data = write_pairs(tmp_path / "x.jsonl", same=(7, 9, 12))
    with pytest.warns(RmlensWarning) as caught:
        pairs = load_pairs(data)
    assert [str(w.message) for w in caught] == [
        f"{data}: 3 pairs whose chosen and rejected are the same text left out (lines 8, 10, 13)"
    ]
    assert len(pairs) == 21 and not {"p7", "p9", "p12"} & set(pairs["id"])


def test_same_text_is_checked_for_tables_and_chat_messages():
    from rmlens.data import validate_pairs

    msg = [{"role": "assistant", "content": "same"}]
    table = pd.DataFrame({"id": ["a", "b", "c"], "prompt": ["p", "q", "r"],
                          "chosen": ["x", msg, "y "], "rejected": ["z", msg, "y"]})  # fmt: skip
    with pytest.warns(RmlensWarning, match=r"<table>: 2 pairs whose chosen and rejected are "
                      r"the same text left out \(rows 2, 3\)"):  # fmt: skip
        assert validate_pairs(table)["id"].tolist() == ["a"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RmlensWarning)
        assert len(validate_pairs(table, drop_same_text=False)) == 3


def test_inspect_still_reports_such_pairs(tmp_path):
    data = write_pairs(tmp_path / "x.jsonl", same=(7,))
    result = run_cli(["data", "inspect", data, "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)["summary"]
    assert summary["pairs"] == 24 and summary["identical_responses"] == 1


# --- an unknown --model, hub out of reach ----------------------------------------------------


@pytest.fixture
def hub_online(monkeypatch):
    """No offline flag and no proxy: whether the hub answers decides."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HTTPS_PROXY", "https_proxy",
                 "ALL_PROXY", "all_proxy"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unknown_model_offline_is_one_line(tiny_encoder_dir, tmp_path, monkeypatch):
    """Before: 31 s and 6 retry lines of the hub client, then rmlens's message."""
    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / "cache"))
    data = write_pairs(tmp_path / "x.jsonl")
    result = run_cli(memorize(data, tmp_path / "o", UNKNOWN), env={"HF_HUB_OFFLINE": "1"})
    no_traceback(result)
    assert result.exit_code == 2, result.output
    assert errors(result.stderr) == [
        f"error: --model '{UNKNOWN}': not a preset (minilm, smollm2-135m) nor a local path; as a "
        "hub id it could not be reached (offline, and not in the local cache)"
    ]
    assert "Retrying" not in result.output


def test_unknown_model_fails_fast_when_the_hub_is_unreachable(hub_online, tmp_path):
    from rmlens.backbones import resolve_model

    port = closed_port()
    hub_online.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    start = time.monotonic()
    reason = rf"could not be reached \(no connection to 127\.0\.0\.1:{port} within 2 s, and not"
    with pytest.raises(InputError, match=reason):
        resolve_model(UNKNOWN)
    assert time.monotonic() - start < 5
    data = write_pairs(tmp_path / "x.jsonl")
    result = run_cli(memorize(data, tmp_path / "o", UNKNOWN))
    assert result.exit_code == 2, result.output
    (line,) = errors(result.stderr)
    assert line == (
        f"error: --model '{UNKNOWN}': not a preset (minilm, smollm2-135m) nor a local path; as a "
        f"hub id it could not be reached (no connection to 127.0.0.1:{port} within 2 s, and not "
        "in the local cache)"
    )
    assert "Retrying" not in result.output


def test_a_cached_hub_id_still_resolves_offline(monkeypatch):
    from rmlens.backbones import _presets

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(_presets, "_in_hub_cache", lambda model: model == "org/cached")
    assert _presets.resolve_model("org/cached") == ("org/cached", None)
    with pytest.raises(InputError, match=r"could not be reached \(offline, and not in the local"):
        _presets.resolve_model("org/other")


def test_hub_retry_warnings_are_silenced_while_loading():
    import logging

    from rmlens.backbones._presets import quiet_hub

    logger = logging.getLogger("huggingface_hub.utils._http")
    before = logger.level
    with quiet_hub():
        assert not logger.isEnabledFor(logging.WARNING)
    assert logger.level == before


# --- CSV that does not parse ----------------------------------------------------------------


def semicolon_csv(path: Path, n: int = 400) -> pd.DataFrame:
    """Quoted text holding semicolons, commas and quotes: read as commas, pandas stops with
    "EOF inside string"."""
    frame = pd.DataFrame({
        "id": [f"p{i}" for i in range(n)],
        "prompt": [f'what is "the" thing; {i}' for i in range(n)],
        "chosen": ["good answer, " * (i % 3 + 1) for i in range(n)],
        "rejected": ['bad; "answer"'] * n,
        "user_id": [f"u{i % 4}" for i in range(n)],
    })  # fmt: skip
    frame.to_csv(path, sep=";", index=False)
    return frame


def test_a_semicolon_csv_is_read_by_its_header(tmp_path):
    path = tmp_path / "semi.csv"
    frame = semicolon_csv(path)
    result = run_cli(["data", "inspect", path, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["pairs"] == 400
    from rmlens.data import load_pairs

    pairs = load_pairs(path)
    assert pairs[["prompt", "chosen", "rejected"]].equals(frame[["prompt", "chosen", "rejected"]])
    assert len(load_pairs(path, sep=";")) == 400


def test_a_csv_that_does_not_parse_suggests_sep(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text('prompt,chosen,rejected\nhi,"hello there,bye\nyo,a,b\n')
    result = run_cli(["data", "inspect", path])
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {path}: could not parse as CSV (EOF inside string starting at row 1); if the "
        "file is not comma-separated, pass --sep ';'\n"
    )


def test_a_csv_that_does_not_parse_with_the_header_separator_names_sep(
    tiny_encoder_dir, tmp_path, monkeypatch
):
    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "semi.csv"
    semicolon_csv(path)
    lines = path.read_text().splitlines()
    lines[334] = lines[334].replace('"bad; ""answer"""', '"bad; unclosed answer')
    path.write_text("\n".join(lines) + "\n")
    result = run_cli(memorize(path, tmp_path / "o", tiny_encoder_dir))
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {path}: could not parse as CSV separated by ';', the separator read from its "
        "header (Expected 5 fields in line 335, saw 8); if that is not its separator, pass --sep\n"
    )
    forced = run_cli(["data", "inspect", path, "--sep", ","])
    assert forced.exit_code == 2 and forced.stderr.count("\n") == 1
    assert forced.stderr.startswith(f"error: {path}: could not parse as CSV separated by ','")


@pytest.mark.parametrize("sep, written", [(";", ";"), ("|", "|"), ("\\t", "\t"), ("tab", "\t")])
def test_sep_names_the_separator(tmp_path, sep, written):
    path = tmp_path / "p.csv"
    path.write_text(f"prompt{written}chosen{written}rejected\nhi{written}a, b{written}c\n")
    result = run_cli(["data", "inspect", path, "--sep", sep, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["pairs"] == 1


def test_a_bad_sep_is_one_line(tmp_path):
    path = tmp_path / "semi.csv"
    semicolon_csv(path, n=4)
    result = run_cli(["data", "inspect", path, "--sep", "ab"])
    assert result.exit_code == 2
    assert result.stderr == "error: --sep must be one character, such as ';' or '\\t', got 'ab'\n"


@pytest.mark.parametrize("command", [
    ["memorize"], ["evaluate"], ["train"], ["score"], ["generalize"], ["mitigate"],
    ["data", "inspect"], ["data", "candidates"],
], ids=" ".join)  # fmt: skip
def test_every_command_that_reads_pairs_takes_sep(command):
    result = run_cli([*command, "--help"])
    assert result.exit_code == 0
    assert "--sep CHAR" in result.stdout
