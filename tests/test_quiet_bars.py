"""transformers' own progress bars stay off stderr while rmlens loads or converts a model;
rmlens says what it does with its own status line (issue 47)."""

from __future__ import annotations

import importlib
import logging

import pytest
from transformers.utils import logging as hf_logging

from rmlens.backbones import quiet_bars

GGUF_MODULE = "transformers.modeling_gguf_pytorch_utils"


@pytest.fixture
def bars_on():
    """transformers' bars on, as in a fresh process; their state put back after the test."""
    was = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()
    yield
    (hf_logging.enable_progress_bar if was else hf_logging.disable_progress_bar)()


def test_quiet_bars_silences_the_gguf_reader_and_restores_it(bars_on, capfd):
    gguf_module = importlib.import_module(GGUF_MODULE)
    loud = gguf_module.tqdm
    with quiet_bars():
        assert list(gguf_module.tqdm(range(3), desc="x")) == [0, 1, 2]
        assert not hf_logging.is_progress_bar_enabled()
        list(hf_logging.tqdm(range(3), desc="y"))
    assert gguf_module.tqdm is loud
    assert capfd.readouterr().err == ""


def test_quiet_bars_restores_the_gguf_reader_after_an_error():
    gguf_module = importlib.import_module(GGUF_MODULE)
    loud = gguf_module.tqdm
    with pytest.raises(RuntimeError), quiet_bars():
        raise RuntimeError("load failed")
    assert gguf_module.tqdm is loud


def test_a_gguf_conversion_prints_no_bar_but_says_what_it_does(bars_on, capfd, caplog,
                                                                tmp_path):
    pytest.importorskip("gguf")
    from rmlens.backbones import _gguf
    from rmlens.tokens._tiny import tiny_causal_lm, tiny_tokenizer
    from test_gguf import write_tiny_gguf

    tok = tiny_tokenizer()
    path = write_tiny_gguf(tmp_path / "tiny.gguf", tok, tiny_causal_lm(tok, seed=0))
    capfd.readouterr()
    with caplog.at_level(logging.INFO, logger="rmlens"):
        out = _gguf.gguf_cached_dir(path, tmp_path / "cache")
    assert (out / "model.safetensors").is_file()
    assert capfd.readouterr().err == ""
    assert f"converting tiny.gguf once into {out}" in caplog.messages


def test_reading_a_classifier_for_its_gradients_prints_no_bar(bars_on, tiny_causal_dir,
                                                               tmp_path, capfd):  # fmt: skip
    """The one-checkpoint audit of an RM from elsewhere may be the process's first load:
    transformers' "Loading weights" bar stays off stderr there too."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from rmlens.hub._classifier_net import classifier_net

    model = AutoModelForSequenceClassification.from_pretrained(tiny_causal_dir, num_labels=1)
    model.config.pad_token_id = 0
    model.save_pretrained(tmp_path / "rm")
    AutoTokenizer.from_pretrained(tiny_causal_dir).save_pretrained(tmp_path / "rm")
    capfd.readouterr()
    hf_logging.enable_progress_bar()
    classifier_net(tmp_path / "rm", format="raw")
    assert "Loading weights" not in capfd.readouterr().err
