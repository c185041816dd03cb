"""lm-evaluation-harness 0.4.13 (pinned in requirements/lm-eval.lock) against a live front, as a team
runs it on its deployment: `--model local-completions` on a multiple-choice (loglikelihood) task,
which sends `/v1/completions` with `echo: true, logprobs: 1, max_tokens: 1` and reads the prompt's
token log probs (issue 47: refused by name before the engine scored prompts), and
`--model local-chat-completions` on a generation task.  The tasks are files this test writes (a
JSONL data file and a task YAML: nothing is downloaded), and one item's loglikelihood must be the
scorer's own number over the served IR.  Its row in the session's PASS/FAIL table (compat_table.py).
About 40-60 s on a 2-core host once the environment is made (CI makes it in the background:
bench/environments.py TEST_ENVIRONMENTS)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from bench.environments import ensure_test_environments, pinned
from tests.integration.compat_table import EVAL_FEATURES, GENERATION, LOGLIKELIHOOD, TOOL
from tests.integration.openai_front_process import MODEL, running_front
from tests.integration.test_prompt_logprobs import in_process_scores

pytestmark = [pytest.mark.server, pytest.mark.slow]
HARNESS = f"lm-evaluation-harness {pinned('lm-eval', 'lm-eval')}"
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "NO_COLOR": "1",
           "TOKENIZERS_PARALLELISM": "false"}
# (country, capital): the multiple-choice items take their wrong choices from the other capitals.
CAPITALS = [("France", "Paris"), ("Germany", "Berlin"), ("Italy", "Rome"), ("Spain", "Madrid"),
            ("Japan", "Tokyo"), ("Egypt", "Cairo"), ("Canada", "Ottawa"), ("Russia", "Moscow")]
MC_TASK = """task: kit_capitals_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: capitals_mc.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "Question: What is the capital of {{country}}?\\nAnswer:"
doc_to_choice: "{{choices}}"
doc_to_target: "{{label}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""
GEN_TASK = """task: kit_capitals_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: capitals_gen.jsonl
test_split: test
output_type: generate_until
doc_to_text: "What is the capital of {{country}}? Answer with the city name only."
doc_to_target: "{{answer}}"
generation_kwargs:
  until: ["\\n", "."]
  max_gen_toks: 12
  do_sample: false
  temperature: 0.0
filter_list:
  - name: strip
    filter:
      # the city: the last capitalised word of the answer ("The capital of France is Paris")
      - function: regex
        regex_pattern: '[A-Z]\\w+'
        group_select: -1
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: true
metadata:
  version: 1.0
"""


def _write_tasks(folder: Path) -> None:
    mc, gen = [], []
    for i, (country, capital) in enumerate(CAPITALS):
        others = [c for _, c in CAPITALS if c != capital]
        choices = [others[(i + k) % len(others)] for k in range(3)]
        choices.insert(i % 4, capital)
        mc.append({"country": country, "choices": [" " + c for c in choices], "label": i % 4})
        gen.append({"country": country, "answer": capital})
    (folder / "capitals_mc.jsonl").write_text("".join(json.dumps(d) + "\n" for d in mc))
    (folder / "capitals_gen.jsonl").write_text("".join(json.dumps(d) + "\n" for d in gen))
    (folder / "kit_capitals_mc.yaml").write_text(MC_TASK)
    (folder / "kit_capitals_gen.yaml").write_text(GEN_TASK)


def _lm_eval(venv: Path, tasks: Path, out: Path, model: str, model_args: str, task: str, *extra: str):
    run = subprocess.run(
        [str(venv / "bin" / "lm_eval"), "--model", model, "--model_args", model_args, "--tasks", task,
         "--include_path", str(tasks), "--output_path", str(out), "--log_samples", *extra],
        capture_output=True, text=True, timeout=240, cwd=tasks, env=os.environ | OFFLINE)
    results = sorted(out.rglob("results_*.json"))
    samples = sorted(out.rglob(f"samples_{task}_*.jsonl"))
    return run, (json.loads(results[-1].read_text()) if results else None), samples


def test_lm_eval_loglikelihood_and_generation_tasks_against_the_front(server, default_engine, tmp_path, compat_table):
    venv = ensure_test_environments(("lm-eval",))["lm-eval"]
    row = compat_table.row(HARNESS, "local-completions, local-chat-completions", kind=TOOL, features=EVAL_FEATURES)
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    _write_tasks(tasks)
    with running_front(server.settings.grpc_url, tmp_path, "--tokenizer", str(default_engine)) as base:
        # lm-eval's defaults: token ids on the wire, counted with the checkpoint's tokenizer (the
        # front decodes them and checks that the engine's tokens are the same ids)
        mc_run, mc, mc_samples = _lm_eval(
            venv, tasks, tmp_path / "mc", "local-completions",
            f"model={MODEL},base_url={base}/v1/completions,num_concurrent=2,max_retries=1,"
            f"tokenizer_backend=huggingface,tokenizer={default_engine}",
            "kit_capitals_mc")
        gen_run, gen, _ = _lm_eval(
            venv, tasks, tmp_path / "gen", "local-chat-completions",
            f"model={MODEL},base_url={base}/v1/chat/completions,num_concurrent=2,max_retries=1,tokenizer_backend=none",
            "kit_capitals_gen", "--apply_chat_template")
    log = "\n".join(r.stdout[-2000:] + r.stderr[-3000:] for r in (mc_run, gen_run))
    acc = mc["results"]["kit_capitals_mc"].get("acc,none") if mc else None
    exact = gen["results"]["kit_capitals_gen"].get("exact_match,strip") if gen else None
    print(f"\n{HARNESS} on the default engine: kit_capitals_mc acc {acc} ({len(CAPITALS)} items, 4 choices), "
          f"kit_capitals_gen exact_match {exact}")
    row.check(LOGLIKELIHOOD, mc_run.returncode == 0 and acc is not None and "Traceback" not in mc_run.stderr,
              f"exit {mc_run.returncode}, acc {acc}")
    row.check(GENERATION, gen_run.returncode == 0 and exact is not None, f"exit {gen_run.returncode}, exact {exact}")
    if row.failures():
        raise AssertionError(f"{row.failures()}\n{log}")
    # a real score, not a table of zeros: the model knows most of these capitals
    assert acc >= 0.5 and exact >= 0.25, (acc, exact)
    # one item's loglikelihoods are the scorer's numbers: sum of the continuation tokens' log probs
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(default_engine / "tokenizer.json"))
    sample = json.loads(mc_samples[-1].read_text().splitlines()[0])
    context, continuation = sample["arguments"]["gen_args_0"]["arg_0"], sample["arguments"]["gen_args_0"]["arg_1"]
    context_ids = tokenizer.encode(context, add_special_tokens=False).ids
    ids = context_ids + tokenizer.encode(continuation, add_special_tokens=False).ids
    mine = float(sum(in_process_scores(default_engine, ids).log_probs[len(context_ids):]))
    theirs = float(sample["resps"][0][0][0])
    assert theirs == pytest.approx(mine, abs=2e-3), (context, continuation, theirs, mine)
