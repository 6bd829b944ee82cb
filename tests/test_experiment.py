"""ExperimentDir: the experiment folder, its atomic files and the one resume check."""

import json

import pandas as pd
import pytest

from rmlens._errors import InputError
from rmlens.experiment import ExperimentDir, UnusableFile


def record(**settings):
    return {"settings": {"runs": 4, "head": {"epochs": 2}, **settings}, "data_sha1": "aa",
            "n_pairs": 10}  # fmt: skip


def test_a_new_directory_has_nothing_to_resume(tmp_path):
    exp = ExperimentDir(tmp_path / "new").create()
    assert exp.path.is_dir()
    assert exp.resume(record(), what="an audit") is None


def test_the_same_experiment_resumes_with_its_saved_record(tmp_path):
    exp = ExperimentDir(tmp_path).create()
    saved = {**record(), "version": "0.0.1"}
    exp.write_record(saved)
    assert exp.resume(record(), what="an audit") == saved


def test_the_refusal_names_each_setting_and_the_data(tmp_path):
    exp = ExperimentDir(tmp_path)
    exp.write_record(record())
    with pytest.raises(InputError) as err:
        exp.resume(record(runs=6, head={"epochs": 3}), what="an audit")
    message = str(err.value)
    assert message == (
        f"`out` {tmp_path} holds an audit with another configuration: runs 4 (saved) vs 6 "
        "(now), head.epochs 2 vs 3; use another `out`, or the saved settings and data "
        "(its config.json) to resume it"
    )
    other = {**record(runs=6), "data_sha1": "bb", "n_pairs": 12}
    with pytest.raises(InputError, match=r"vs 6 \(now\); and other data \(10 pairs \(saved\) "
                       r"vs 12 \(now\), fingerprint aa vs bb"):
        exp.resume(other, what="an audit")
    with pytest.raises(InputError, match=r"holds an RM with other data \(10 pairs, fingerprint"):
        exp.resume({**record(), "data_sha1": "cc"}, what="an RM")


def test_the_hint_follows_the_settings(tmp_path):
    exp = ExperimentDir(tmp_path)
    exp.write_record(record())
    with pytest.raises(InputError, match=r"vs 5 \(now\) \(grew\); use another"):
        exp.resume(record(runs=5), what="an audit", hint=" (grew)")


def test_a_hint_may_read_the_saved_record(tmp_path):
    exp = ExperimentDir(tmp_path)
    exp.write_record(record(runs=8))
    with pytest.raises(InputError, match=r"vs 5 \(now\) \(it had 8\); use another"):
        exp.resume(record(runs=5), what="an audit",
                   hint=lambda saved: f" (it had {saved['settings']['runs']})")  # fmt: skip


def test_a_custom_view_and_record_file(tmp_path):
    exp = ExperimentDir(tmp_path, record="train.json")
    exp.write_record({"train_config": {"lr": 1.0}, "data_sha1": "x", "eval_sha1": None})
    view = {"settings": lambda r: r["train_config"], "data_keys": ("data_sha1", "eval_sha1")}
    same = {"train_config": {"lr": 1.0}, "data_sha1": "x", "eval_sha1": None}
    assert exp.resume(same, what="an RM", **view)["train_config"] == {"lr": 1.0}
    with pytest.raises(InputError, match=r"lr 1.0 \(saved\) vs 2.0 .*\(its train.json\)"):
        exp.resume({**same, "train_config": {"lr": 2.0}}, what="an RM", **view)
    with pytest.raises(InputError, match="other data"):
        exp.resume({**same, "eval_sha1": "e"}, what="an RM", **view)


def test_bad_records_and_folders_are_bad_input(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(InputError, match=r"config.json: not valid JSON"):
        ExperimentDir(tmp_path).read_record()
    (tmp_path / "config.json").write_text("[1]")
    with pytest.raises(InputError, match="expected a JSON object, found list"):
        ExperimentDir(tmp_path).read_record()
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="is a file, not a directory"):
        ExperimentDir(tmp_path / "file").create()


def test_stale_temporary_files_are_removed(tmp_path):
    exp = ExperimentDir(tmp_path)
    (tmp_path / ".x.json.1.tmp").write_text("half")
    (tmp_path / ".rm.ab.tmp").mkdir()
    (tmp_path / "kept.json").write_text(json.dumps({}))
    exp.clean_stale()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.json"]


def test_optional_tables_and_needed_columns(tmp_path):
    exp = ExperimentDir(tmp_path)
    assert exp.read_table("absent.parquet", required=False) is None
    with pytest.raises(InputError, match=r"absent.parquet: not found"):
        exp.read_table("absent.parquet")
    exp.write_table(pd.DataFrame({"a": [1], "b": [2.0]}), "good.parquet")
    frame = exp.read_table("good.parquet", required=False, needed=("a", "b"))
    assert list(frame.columns) == ["a", "b"]
    with pytest.raises(UnusableFile) as err:
        exp.read_table("good.parquet", needed=("a", "c", "d"))
    assert str(err.value) == f"{tmp_path / 'good.parquet'}: missing column(s) c, d, found a, b"
    assert err.value.problem == "missing column(s) c, d, found a, b"
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 half a file")
    with pytest.raises(UnusableFile, match=r"broken.parquet: not a readable Parquet file") as err:
        exp.read_table("broken.parquet", required=False)
    assert err.value.path == tmp_path / "broken.parquet" and isinstance(err.value, InputError)


def test_an_unusable_json_file_says_what_is_wrong_apart_from_what_to_do(tmp_path):
    exp = ExperimentDir(tmp_path)
    assert exp.read_json("absent.json", required=False) is None
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(UnusableFile) as err:
        exp.read_json("broken.json", required=False)
    assert str(err.value).endswith("; delete it") and err.value.problem.startswith("not valid JSON")
    (tmp_path / "list.json").write_text("[1]")
    assert exp.read_json("list.json") == [1]
    with pytest.raises(UnusableFile, match="expected a JSON object, found list"):
        exp.read_json("list.json", mapping=True)


def test_a_folder_that_does_not_exist_misses_every_file(tmp_path):
    assert ExperimentDir(tmp_path / "nowhere").missing(["config.json"]) == ["config.json"]


def test_a_cached_step_is_reused_only_with_its_settings_data_and_files(tmp_path):
    exp = ExperimentDir(tmp_path / "sweep").create()
    record = {"settings": {"prompts": ("a", "b"), "k": 1}, "data_sha1": "x"}
    assert exp.reusable(record, ["sweep.parquet"]) is None  # nothing saved yet
    exp.write_record({**record, "n_tokens": 5})
    assert exp.reusable(record, ["sweep.parquet"]) is None  # the output is missing
    pd.DataFrame({"a": [1]}).to_parquet(exp / "sweep.parquet")
    saved = exp.reusable(record, ["sweep.parquet"])  # a tuple compares as its saved list
    assert saved is not None and saved["n_tokens"] == 5
    assert exp.reusable({**record, "data_sha1": "y"}, ["sweep.parquet"]) is None
    other = {"settings": {"prompts": ["a"], "k": 1}}
    assert exp.reusable(other, ["sweep.parquet"]) is None  # other settings: run again
