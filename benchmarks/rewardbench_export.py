"""An exported rmlens RM read by every consumer it is made for (issue 38).

1. builds a small RM offline: a tiny random Llama shaped like SmolLM2 (2 layers, a
   byte-level BPE trained on the pairs' text, a ChatML template whose turn end
   ``<|im_end|>`` is also EOS and pad), or ``--model smollm2-135m`` (the packaged
   SmolLM2-135M), fine-tuned for ``--epochs`` in ``--format`` (chat or raw) on synthetic
   pairs (``rmlens.synthesize``) or on ``--data`` (HH transcripts included);
2. exports it with ``rmlens.hub.export_rm`` (what ``rmlens export RM --out DIR`` does);
3. scores ``--pairs`` held-out pairs (those that fit in ``--max-length`` tokens) every way a
   consumer reads the folder, against ``load_rm(RM)``:

   - rmlens: ``load_rm(EXPORT)`` (offset added back);
   - transformers, this interpreter: the exported tokenizer and chat template, one
     right-padded batch at a time (5.x reads the last non-pad token);
   - a reader that stops at the first pad: TRL's PPO ``get_reward``;
   - TRL's GRPO: ``rmlens.hub.reward_function(EXPORT)`` with plain-string prompts, and,
     for contrast, what GRPO computes when given the folder's path (``prompt +
     completion``, no template, no EOS); the same reward function in bfloat16 (GRPO's
     default ``bf16=True``);
   - ``--old-python PY ...``: the same plain-transformers scoring under other venvs'
     interpreters (transformers 4.44 and 4.48 read the token before the *first* pad);
   - with ``--rewardbench-bin PATH`` (else a ``rewardbench`` on PATH), in its venv
     (transformers 4.51): plain transformers; the ``rewardbench`` CLI itself (``--model=EXPORT
     --dataset=FILE --load_json``), on a machine without CUDA through a wrapper that only
     maps its pipeline's ``.to("cuda")`` to the CPU; and RewardBench's own text preparation
     (``load_and_process_dataset``) with its pipeline's tokenization;
   - the model card's code example, run as written under every interpreter above.

   Without a ``rewardbench`` executable the RewardBench rows are skipped and the install
   commands printed (a separate venv: RewardBench pins transformers==4.51.0).

What RewardBench 0.1.4 needs, found with this script (CPU only, torch 2.13 CPU build):
``setuptools<81`` (rewardbench.py imports ``pkg_resources``); a tokenizer folder that
transformers 4.51 reads (5.x writes ``tokenizer_class: TokenizersBackend`` and a list of
``extra_special_tokens``) and a ``config.json`` with ``rope_theta`` (4.51 ignores 5.x's
``rope_parameters`` and silently uses RoPE base 10000): the export writes both
(``readable_by_v4``); ``--not_quantized`` (else 8-bit
bitsandbytes); a CUDA GPU: its ``RewardBenchPipeline`` moves every batch with
``.to("cuda")`` (rewardbench/models/pipeline.py:44), so the CLI cannot score a sequence
classifier on a CPU-only machine. The dataset: ``chosen`` and ``rejected`` must be whole
conversations (lists of messages ending with the answer): it takes the prompt from
``chosen[:-1]``; a string ``chosen`` fails. ``id`` is optional (kept in its outputs).

Prints each way's pairwise accuracy (a tie counts 0, as RewardBench counts it), ties, the
largest |reward difference| from rmlens's rewards (offset added) and from its margins
r+ - r- (which need no offset), and the time. Not a test.

    python benchmarks/rewardbench_export.py [--model tiny|smollm2-135m] [--data PAIRS]
        [--format chat|raw] [--train-pairs 400] [--pairs 100] [--epochs 1]
        [--max-length 256] [--center-coef 0.01] [--old-python /tmp/venv-tf444/bin/python ...]
        [--rewardbench-bin /tmp/rbenv/bin/rewardbench] [--rewardbench-args "..."]
        [--work DIR]

The venvs (torch 2.13.0 is the CPU build on this machine's disk; any other pulls gigabytes):
``python -m venv /tmp/venv-tf448 && /tmp/venv-tf448/bin/pip install torch==2.13.0
transformers==4.48.3 safetensors jinja2`` (4.44.2 likewise) and the RewardBench one below.

The helper modes ``--score-hf`` and ``--score-rewardbench-prep`` run in the other venv and
import only torch, transformers (and rewardbench): this file imports rmlens lazily.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from helpers.export_readers import (
    hf_encode,
    load_export,
    run_card,
    score_hf,
    score_rewardbench_prep,
    tiny_llama,
)

RB_FLAGS = "--not_quantized --torch_dtype=float32"  # no 8-bit bitsandbytes, no float16
INSTALL = (
    "python -m venv /tmp/rbenv && /tmp/rbenv/bin/pip install torch transformers==4.51.0 "
    "rewardbench==0.1.4 'setuptools<81'"
)
RB_CPU = """# the rewardbench CLI, unchanged but for its .to("cuda") on a CPU-only machine
import sys

import torch
from transformers.tokenization_utils_base import BatchEncoding

if not torch.cuda.is_available():
    _to = BatchEncoding.to
    BatchEncoding.to = lambda self, device, **kw: _to(
        self, "cpu" if str(device).startswith("cuda") else device, **kw)
from rewardbench.rewardbench import main

sys.exit(main())
"""
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip


# ---------------------------------------------------------------------------------------
# The benchmark (rmlens's venv)
# ---------------------------------------------------------------------------------------



def records_of(pairs) -> list[dict]:
    """Pairs as RewardBench's preference JSON wants them: ``chosen`` and ``rejected`` are
    whole conversations ending with the assistant's answer (it takes the prompt from
    ``chosen[:-1]``); ``prompt`` is shown only; ``id`` comes back in its outputs."""
    from rmlens.backbones._tokenize import prompt_messages, raw_text
    from rmlens.data._schema import to_text

    class NoEos:
        eos_token = None

    records = []
    for row in pairs.itertuples(index=False):
        messages = prompt_messages(row.prompt)
        records.append({
            "id": str(row.id), "prompt": to_text(row.prompt),
            "chosen": messages + [{"role": "assistant", "content": to_text(row.chosen)}],
            "rejected": messages + [{"role": "assistant", "content": to_text(row.rejected)}],
            "raw_chosen": raw_text(NoEos(), row.prompt, row.chosen),
            "raw_rejected": raw_text(NoEos(), row.prompt, row.rejected),
        })  # fmt: skip
    return records


def pick_heldout(pool, export: Path, n: int, max_length: int):
    """The first ``n`` pool pairs whose two sequences fit in ``max_length`` tokens of the
    exported tokenizer (no truncation anywhere: RewardBench does not truncate)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(export)
    fmt = json.loads((export / "config.json").read_text()).get("rmlens_format", "chat")
    keep, records, tried = [], records_of(pool), 0
    for i, record in enumerate(records):
        lengths = [len(hf_encode(tokenizer, record, s, fmt)) for s in ("chosen", "rejected")]
        tried += 1
        if max(lengths) <= max_length:
            keep.append(i)
        if len(keep) == n:
            break
    return pool.iloc[keep].reset_index(drop=True), [records[i] for i in keep], tried


def find_rewardbench(flag: str | None) -> str | None:
    if flag:
        return flag if Path(flag).is_file() else None
    return shutil.which("rewardbench")


def run_helper(python: str, argv: list[str], timeout: int) -> tuple[dict | None, str]:
    """This file's helper mode under another interpreter: (its JSON, or None and why)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    cmd = [python, str(Path(__file__).resolve()), *argv, "--helper-out", out]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **OFFLINE})  # fmt: skip
    if proc.returncode != 0:
        return None, last_error(proc.stderr + proc.stdout)
    return json.loads(Path(out).read_text()), ""


def last_error(text: str) -> str:
    """Where a traceback failed: its last frame in rewardbench's code (if any), its last
    frame, and the exception line (log lines interleaved with it are skipped)."""
    lines = text.strip().splitlines()
    frames = [ln.strip() for ln in lines if ln.strip().startswith('File "')]
    errors = [ln for ln in lines if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Exit)\b", ln)]
    where = [f for f in frames if "/rewardbench/" in f][-1:] + frames[-1:]
    where = [re.sub(r'File "(.*)", line (\d+), in (.*)', r"\1:\2 (\3)", f) for f in where]
    error = errors[-1] if errors else (lines[-1] if lines else "no output")
    return " -> ".join(dict.fromkeys(where)) + (": " if where else "") + error.strip()


def run_rewardbench(rb: str, export: Path, data: Path, args, work: Path) -> tuple[dict | None, str]:
    """The RewardBench CLI on the exported folder. It is run from the export's parent with a
    relative ``--model``: it writes ``{output_dir}/{model}_outputs.jsonl`` with
    ``os.path.join`` (an absolute model path would put it beside the model)."""
    results = work / "rewardbench-results"
    shutil.rmtree(results, ignore_errors=True)
    wrapper = work / "rewardbench_cpu.py"
    wrapper.write_text(RB_CPU)
    cmd = [str(Path(rb).parent / "python"), str(wrapper), f"--model={export.name}",
           f"--dataset={data}", "--load_json",
           f"--batch_size={args.batch_size}", f"--max_length={args.max_length}",
           f"--output_dir={results}/", *shlex.split(args.rewardbench_args)]  # fmt: skip
    print("  $ " + " ".join(shlex.quote(c) for c in cmd))
    proc = subprocess.run(cmd, cwd=export.parent, capture_output=True, text=True,
                          timeout=args.timeout, env={**os.environ, **OFFLINE})  # fmt: skip
    (work / "rewardbench.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        return None, f"exit {proc.returncode}: {last_error(proc.stderr + proc.stdout)}"
    summary = json.loads((results / f"{export.name}.json").read_text())
    rows = [json.loads(ln) for ln in (results / f"{export.name}_outputs.jsonl").open()]
    by_id = {r["id"]: r for r in rows}
    return {"accuracy": summary["accuracy"], "ids": list(by_id),
            "chosen": [by_id[i]["scores_chosen"] for i in by_id],
            "rejected": [by_id[i]["scores_rejected"] for i in by_id]}, ""  # fmt: skip


def rewardbench_rows(rb: str, export: Path, records, records_file, data_file, args, work):
    """Rows from RewardBench's venv: transformers 4.x on the folder as written (the export
    writes the keys 4.x reads, ``rmlens.hub._export.readable_by_v4``), the CLI, and
    RewardBench's own text preparation on CPU."""
    python = str(Path(rb).parent / "python")
    rows = []

    def helper(name, argv, has_offset, note=lambda out: ""):
        start = time.perf_counter()
        out, why = run_helper(
            python,
            [*argv, "--batch-size", str(args.batch_size), "--max-length", str(args.max_length)],
            args.timeout,
        )
        seconds = time.perf_counter() - start
        if out is None:
            rows.append((name, None, None, has_offset, seconds, f"failed: {why}"))
        else:
            rows.append((name, out["chosen"], out["rejected"], has_offset, seconds, note(out)))
        return out

    out = helper("transformers (rb venv), as written", ["--score-hf", str(export),
                 str(records_file)], True, lambda o: f"{o['tokenizer_class']}")  # fmt: skip
    if out:
        rows[-1] = (rows[-1][0].replace("transformers", f"transformers {out['version']}"),
                    *rows[-1][1:])  # fmt: skip
    for label, folder in (("as written", export),):
        start = time.perf_counter()
        cli, why = run_rewardbench(rb, folder, data_file, args, work)
        seconds = time.perf_counter() - start
        if cli is None:
            rows.append((f"rewardbench CLI, {label}", None, None, False, seconds,
                         f"failed: {why}"))  # fmt: skip
        else:
            assert cli["ids"] == [r["id"] for r in records], "rewardbench reordered the pairs"
            rows.append((f"rewardbench CLI, {label}", cli["chosen"], cli["rejected"], False,
                         seconds, f"its own accuracy {cli['accuracy']:.4f}"))  # fmt: skip
    text = hf_text(export, records[0])
    helper("rewardbench prep+pipeline on CPU",
           ["--score-rewardbench-prep", str(export), str(data_file)], False,
           lambda o: f"its text = ours: {o['first_text_chosen'] == text}")  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="tiny, smollm2-135m, or a causal LM")
    parser.add_argument("--data", help="a pair file (default: synthetic pairs)")
    parser.add_argument("--train-pairs", type=int, default=400)
    parser.add_argument("--pairs", type=int, default=100, help="held-out pairs scored")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, help="default: 1e-3 (tiny, full), 1e-4 (LoRA)")
    parser.add_argument("--finetune", help="lora or full (default: full for tiny, else lora)")
    parser.add_argument(
        "--center-coef", type=float, default=0.01, help="reward centering: gives the head a bias"
    )
    parser.add_argument("--format", default="chat", choices=("chat", "raw"))
    parser.add_argument("--old-python", nargs="*", default=[],
                        help="interpreters of venvs with older transformers (4.44, 4.48)")
    parser.add_argument("--rewardbench-bin", help="the rewardbench executable of its venv")
    parser.add_argument("--rewardbench-args", default=RB_FLAGS,
                        help=f"extra CLI flags (default: {RB_FLAGS!r})")  # fmt: skip
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per subprocess")
    parser.add_argument("--work", help="folder for the RM, export and files (default: temp)")
    parser.add_argument("--score-hf", nargs=2, metavar=("EXPORT", "RECORDS"),
                        help=argparse.SUPPRESS)  # fmt: skip
    parser.add_argument("--score-rewardbench-prep", nargs=2, metavar=("EXPORT", "DATA"),
                        help=argparse.SUPPRESS)  # fmt: skip
    parser.add_argument("--run-card", metavar="EXPORT", help=argparse.SUPPRESS)
    parser.add_argument("--helper-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.score_hf or args.score_rewardbench_prep or args.run_card:  # another venv's
        if args.run_card:
            result = run_card(args.run_card)
        elif args.score_hf:
            records = json.loads(Path(args.score_hf[1]).read_text())
            result = score_hf(args.score_hf[0], records, args.batch_size)
        else:
            folder, data = args.score_rewardbench_prep
            result = score_rewardbench_prep(folder, data, args.batch_size, args.max_length)
        Path(args.helper_out).write_text(json.dumps(result))
        return
    bench(args)


def bench(args) -> None:
    import logging
    import warnings

    import numpy as np
    import torch
    import transformers

    import rmlens
    from rmlens.data import SynthConfig, load_pairs, synthesize
    from rmlens.hub import export_rm, load_rm, train
    from rmlens.rewards import TrainConfig

    warnings.filterwarnings("ignore")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    work = Path(args.work or tempfile.mkdtemp(prefix="rmlens-rewardbench-"))
    work.mkdir(parents=True, exist_ok=True)
    n_pool = args.train_pairs + 3 * args.pairs  # spare held-out pairs: some may not fit
    pairs = load_pairs(args.data) if args.data else synthesize(SynthConfig(n_pairs=n_pool, seed=0))
    pairs = pairs.sample(frac=1.0, random_state=0).reset_index(drop=True)
    trainset, pool = pairs.iloc[: args.train_pairs], pairs.iloc[args.train_pairs :]
    tiny = args.model == "tiny"
    finetune = args.finetune or ("full" if tiny else "lora")
    lr = args.lr or (1e-3 if finetune == "full" else 1e-4)
    if tiny:
        texts = [str(t) for col in ("prompt", "chosen", "rejected") for t in pairs[col]]
        model = str(tiny_llama(work / "tiny-llama", texts))
    else:
        model = args.model
    print(f"rmlens {rmlens.__version__}, transformers {transformers.__version__}, torch "
          f"{torch.__version__}, {torch.get_num_threads()} CPU threads")  # fmt: skip
    print(f"model {args.model} ({finetune}, lr {lr}, centering {args.center_coef}), "
          f"{len(trainset)} training pairs ({args.data or 'synthetic'}), {args.epochs} "
          f"epoch(s), max length "
          f"{args.max_length}; work folder {work}")  # fmt: skip

    start = time.perf_counter()
    config = TrainConfig(model=model, finetune=finetune, epochs=args.epochs, lr=lr,
                         head_lr=max(lr, 1e-3), batch_size=args.batch_size,
                         max_length=args.max_length, center_coef=args.center_coef,
                         device="cpu", seed=0, format=args.format)  # fmt: skip
    shutil.rmtree(work / "rm", ignore_errors=True)
    train(trainset, config, out=work / "rm", quiet=True)
    print(f"trained in {time.perf_counter() - start:.1f} s")
    start = time.perf_counter()
    export = work / "export"
    shutil.rmtree(export, ignore_errors=True)
    done = export_rm(work / "rm", export)
    print(f"exported in {time.perf_counter() - start:.1f} s to {export}: {done.kind}, format "
          f"{done.format}, offset {done.offset:+.6f}, export check max |diff| "
          f"{done.max_abs_diff:.2e}")  # fmt: skip
    print("  files: " + ", ".join(sorted(p.name for p in export.iterdir())))

    heldout, records, tried = pick_heldout(pool, export, args.pairs, args.max_length)
    print(f"{len(heldout)} held-out pairs ({tried - len(heldout)} of the first {tried} "
          f"exceed {args.max_length} tokens)")  # fmt: skip
    records_file = work / "records.json"
    records_file.write_text(json.dumps(records))
    data_file = work / "rewardbench-pairs.json"  # JSON lines: one pair per line
    fields = ("id", "prompt", "chosen", "rejected")
    data_file.write_text("".join(json.dumps({k: r[k] for k in fields}) + "\n" for r in records))

    rows = []  # (name, chosen, rejected, offset added?, seconds, note)
    start = time.perf_counter()
    r_c, r_r = load_rm(work / "rm", device="cpu").score_pairs(heldout)
    ref_c, ref_r = np.asarray(r_c, float), np.asarray(r_r, float)
    rows.append(("rmlens load_rm(RM)", ref_c, ref_r, True, time.perf_counter() - start, ""))
    start = time.perf_counter()
    e_c, e_r = load_rm(export, device="cpu").score_pairs(heldout)
    rows.append(("rmlens load_rm(EXPORT)", e_c, e_r, True, time.perf_counter() - start, ""))
    start = time.perf_counter()
    hf = score_hf(str(export), records, args.batch_size)
    rows.append((f"transformers {hf['version']}", hf["chosen"], hf["rejected"], True,
                 time.perf_counter() - start, ""))  # fmt: skip

    rows += consumer_rows(export, heldout, records, args)
    card = {"this venv": run_card(str(export))["reward"]}
    for python in args.old_python:
        out, why = run_helper(python, ["--score-hf", str(export), str(records_file),
                                       "--batch-size", str(args.batch_size)], args.timeout)
        name = f"transformers {out['version'] if out else '?'} ({python}), first pad"
        rows.append((name, out and out["chosen"], out and out["rejected"], True, 0.0,
                     "" if out else f"failed: {why}"))  # fmt: skip
        got, why = run_helper(python, ["--run-card", str(export)], args.timeout)
        card[out["version"] if out else python] = got["reward"] if got else why

    rb = find_rewardbench(args.rewardbench_bin)
    if rb is None:
        why = (f"{args.rewardbench_bin} not found" if args.rewardbench_bin
               else "no rewardbench executable on PATH")  # fmt: skip
        print(f"RewardBench skipped: {why}. Install it in a separate venv (it pins "
              f"transformers==4.51.0; its CLI needs a CUDA GPU), then pass --rewardbench-bin:"
              f"\n  {INSTALL}\n  python benchmarks/{Path(__file__).name} --rewardbench-bin "
              "/tmp/rbenv/bin/rewardbench")  # fmt: skip
        rows.append(("rewardbench CLI", None, None, False, 0.0, f"skipped: {why}"))
    else:
        rows += rewardbench_rows(rb, export, records, records_file, data_file, args, work)
        got, why = run_helper(str(Path(rb).parent / "python"), ["--run-card", str(export)],
                              args.timeout)  # fmt: skip
        card["rewardbench venv"] = got["reward"] if got else why
    print(
        f"\n{len(heldout)} held-out pairs; accuracy: chosen > rejected (a tie counts 0, as "
        f"in RewardBench); max |diff| against rmlens load_rm(RM): rewards (offset "
        f"{done.offset:+.4f} added where the way does not add it) and margins r+ - r-"
    )
    print(f"{'way':54} {'accuracy':>8} {'ties':>4} {'max|dr|':>9} {'max|dm|':>9} "
          f"{'seconds':>7}  note")  # fmt: skip
    for name, c, r, has_offset, seconds, note in rows:
        if c is None:
            print(f"{name:54} {'-':>8} {'-':>4} {'-':>9} {'-':>9} {seconds:7.1f}  {note}")
            continue
        c, r = np.asarray(c, float), np.asarray(r, float)
        if not has_offset:
            c, r = c + done.offset, r + done.offset
        acc, ties = float(np.mean(c > r)), int(np.sum(c == r))
        dr = max(np.abs(c - ref_c).max(), np.abs(r - ref_r).max())
        dm = np.abs((c - r) - (ref_c - ref_r)).max()
        print(f"{name:54} {acc:8.4f} {ties:4d} {dr:9.2e} {dm:9.2e} {seconds:7.1f}  {note}")
    expected = float(load_rm(work / "rm", device="cpu").score(["What is two plus two?"],
                                                                ["Four."])[0])  # fmt: skip
    print(f"\nthe model card's example, run as written: rmlens's reward {expected:.6f}")
    for where, got in card.items():
        shown = f"{got:.6f} (|diff| {abs(got - expected):.1e})" if isinstance(got, float) else got
        print(f"  {where:54} {shown}")


def consumer_rows(export: Path, heldout, records, args) -> list[tuple]:
    """This venv's consumers: TRL's PPO reader, GRPO through ``reward_function`` (strings),
    GRPO given the folder's path (what TRL's own path computes), bf16."""
    import numpy as np
    import torch

    from rmlens.data._schema import to_text
    from rmlens.hub import reward_function

    model, tokenizer, extra = load_export(str(export), "right")
    fmt, pad = extra.get("rmlens_format", "chat"), model.config.pad_token_id
    rows = []
    try:
        from trl.experimental.utils import get_reward
    except ImportError:
        rows.append(("TRL PPO get_reward (first pad)", None, None, False, 0.0, "no TRL"))
    else:
        scores = {}
        start = time.perf_counter()
        for side in ("chosen", "rejected"):
            seqs = [hf_encode(tokenizer, r, side, fmt) for r in records]
            out = []
            for i in range(0, len(seqs), args.batch_size):
                batch = seqs[i : i + args.batch_size]
                width = max(map(len, batch))
                ids = torch.tensor([b + [pad] * (width - len(b)) for b in batch])
                with torch.inference_mode():
                    out += get_reward(model, ids, pad, 0)[1].double().tolist()
            scores[side] = out
        rows.append(("TRL PPO get_reward (first pad)", scores["chosen"], scores["rejected"],
                     False, time.perf_counter() - start, ""))  # fmt: skip
    prompts = [to_text(p) for p in heldout.prompt]
    for dtype in ("float32", "bfloat16"):
        start = time.perf_counter()
        reward = reward_function(export, dtype=dtype, device="cpu", batch_size=args.batch_size)
        c = reward(prompts, [to_text(x) for x in heldout.chosen])
        r = reward(prompts, [to_text(x) for x in heldout.rejected])
        rows.append((f"GRPO reward_function(EXPORT), strings, {dtype}", c, r, True,
                     time.perf_counter() - start, ""))  # fmt: skip
    start = time.perf_counter()
    by_path = {}
    for side in ("chosen", "rejected"):  # TRL's GRPO given the path, string prompts
        texts = [p + to_text(x) for p, x in zip(prompts, heldout[side])]
        out = []
        for i in range(0, len(texts), args.batch_size):
            enc = tokenizer(texts[i : i + args.batch_size], return_tensors="pt", padding=True,
                            padding_side="right", add_special_tokens=False)  # fmt: skip
            with torch.inference_mode():
                out += model(**enc).logits[:, 0].double().tolist()
        by_path[side] = np.asarray(out)
    rows.append(("GRPO given the folder's path, strings (TRL's own)", by_path["chosen"],
                 by_path["rejected"], False, time.perf_counter() - start,
                 "no template, no EOS: why reward_function"))  # fmt: skip
    return rows


def hf_text(export: Path, record: dict) -> str:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(export)
    if not tokenizer.chat_template:  # a raw RM's folder: RewardBench must stop on it
        return ""
    return tokenizer.apply_chat_template(record["chosen"], tokenize=False)


if __name__ == "__main__":
    main()
