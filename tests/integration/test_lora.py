"""LoRA adapters on the CPU engine (`--lora-dir`): two PEFT adapters made here for the default
model (random, seeded, strong enough to change answers) served beside the base model; picked
with NVIDIA's lora_task_id through the ensemble and the gRPC client, and as
`<model>:<adapter>` through the OpenAI front.

Reference: PEFT's own forward pass of the float32 checkpoint with the same adapter.  The engine
has INT8 weights, so greedy answers part from the float32 ones where two tokens are nearly
tied: the base model itself, on these prompts, agreed with float32 for 4, 8, 12 and 16 tokens
(measured).  So the check is the first 4 tokens on at least half the prompts, for the adapter
and (control) for the base model, and the adapter's answers differ from the base's."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from build_engines.repository import render_repository
from client import ChatMessage, InvalidRequestError, LlmClient, SamplingParams
from contract import lora
from tests.integration.openai_front_process import MODEL, running_front

pytestmark = [pytest.mark.server, pytest.mark.slow]

PROMPTS = ("Name three colours.", "What is the capital of France?", "Write a haiku about rain.",
           "Explain gravity briefly.")
TOKENS = 16
EOS = 2  # the default model's end token
ADAPTERS = {"concise": ("o_proj",), "playful": ("q_proj", "v_proj")}  # name -> target modules (ids 1, 2)


def make_adapter(checkpoint: Path, out: Path, modules: tuple[str, ...], seed: int) -> Path:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(checkpoint, torch_dtype=torch.float32)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=list(modules), lora_dropout=0.0, init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(out)
    return out


def make_adapters(checkpoint: Path, root: Path) -> Path:
    """The two test adapters (ADAPTERS, seeded) under `root`."""
    for seed, (name, modules) in enumerate(ADAPTERS.items(), 1):
        make_adapter(checkpoint, root / name, modules, seed)
    return root


@pytest.fixture(scope="module")
def lora_dir(default_checkpoint, tmp_path_factory) -> Path:
    return make_adapters(default_checkpoint, tmp_path_factory.mktemp("adapters"))


@pytest.fixture(scope="module")
def lora_server(default_engine, lora_dir, serve, tmp_path_factory):
    """The default engine fuses q/k/v (build_engines/openvino/fusion.py): 'playful' (q_proj,
    v_proj) is served rewritten for the fused node (build_engines/openvino/fused_lora.py), 'concise'
    (o_proj) as it is."""
    repo = tmp_path_factory.mktemp("lora-repo") / "repository"
    render_repository(default_engine, repo, lora_dir=lora_dir)
    assert [p.name for p in (repo / "openvino_llm" / "lora").iterdir()] == ["playful.safetensors"]
    return serve(repo)


def test_stacked_adapters_on_the_fused_engine_answer_as_the_originals_on_an_unfused_one(
        default_engine, unfused_engine, lora_dir, tmp_path):
    """In-process, OpenVINO GenAI's pipeline with the served numerics: each adapter's greedy
    answers on the fused engine (rewritten where it adapts fused modules) equal the same
    adapter's on the engine built with --no-fuse-projections."""
    import openvino_genai as og

    from build_engines.openvino.fused_lora import for_fused_engine
    from contract.build_record import BuildRecord
    from contract.model_configs import OpenVinoEngineParameters
    from model_repository.engines.openvino.openvino_backend import engine_properties

    adapters = lora.discover(lora_dir)
    stacked, files = for_fused_engine(adapters, BuildRecord.read(default_engine).fusion, tmp_path)
    for relative, content in files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_bytes(content)
    config = og.GenerationConfig()
    config.max_new_tokens, config.do_sample = TOKENS, False
    answers = {}
    for engine, served in ((unfused_engine, adapters), (default_engine, stacked)):
        properties = engine_properties(OpenVinoEngineParameters(engine, max_num_seqs=4, max_num_batched_tokens=256))
        for adapter in served:
            weights = og.Adapter(adapter.weights)
            pipe = og.LLMPipeline(str(engine), "CPU", adapters=og.AdapterConfig(weights), **properties)
            answers.setdefault(adapter.name, []).append(
                [pipe.generate(q, config, adapters=og.AdapterConfig(weights, adapter.alpha)) for q in PROMPTS])
    for name, (plain, fused) in answers.items():
        assert fused == plain, name


@pytest.fixture(scope="module")
def client(lora_server):
    with LlmClient(lora_server.settings.grpc_url) as c:
        yield c


def _ids(tokenizer, question: str) -> list[int]:
    return tokenizer.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                         tokenize=True, return_dict=True)["input_ids"]


def peft_references(default_checkpoint: Path, lora_dir: Path) -> dict[str, list[list[int]]]:
    """Greedy float32 answers (token ids) per adapter name ('' for the base model)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(default_checkpoint)
    out = {}
    for name in ("", *ADAPTERS):
        model = AutoModelForCausalLM.from_pretrained(default_checkpoint, torch_dtype=torch.float32)
        if name:
            model = PeftModel.from_pretrained(model, lora_dir / name)
        answers = []
        with torch.no_grad():
            for q in PROMPTS:
                ids = _ids(tokenizer, q)
                generated = model.generate(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                           max_new_tokens=TOKENS, do_sample=False)
                answers.append(generated[0, len(ids):].tolist())
        out[name] = answers
    return out


@pytest.fixture(scope="module")
def references(default_checkpoint, lora_dir) -> dict[str, list[list[int]]]:
    return peft_references(default_checkpoint, lora_dir)


def _agreement(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _served(client, task_id: int | None) -> list[list[int]]:
    sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0, lora_task_id=task_id)
    return [list(client.generate([ChatMessage("user", q)], sampling).token_ids) for q in PROMPTS]


def test_adapters_follow_the_peft_reference_and_change_the_answers(client, references):
    base = _served(client, None)
    assert sum(_agreement(s, r) >= 4 for s, r in zip(base, references[""])) >= 2  # the control
    for task_id, name in enumerate(ADAPTERS, 1):
        served = _served(client, task_id)
        agreement = [_agreement(s, r) for s, r in zip(served, references[name])]
        assert sum(a >= 4 for a in agreement) >= 2, (name, agreement)
        assert sum(s != b for s, b in zip(served, base)) >= 1, name  # the adapter is applied
        assert _served(client, 0) == base  # 0 is the base model


def test_requests_for_different_adapters_run_at_once_and_keep_their_answers(client, lora_server):
    sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0)
    alone = {t: client.generate(PROMPTS[0], replace(sampling, lora_task_id=t)).text for t in (0, 1, 2)}
    together: dict[int, str] = {}

    def run(task_id: int) -> None:
        with LlmClient(lora_server.settings.grpc_url) as c:
            together[task_id] = c.generate(PROMPTS[0], replace(sampling, lora_task_id=task_id)).text

    threads = [threading.Thread(target=run, args=(t,)) for t in (0, 1, 2, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert together == alone


def test_streaming_with_an_adapter_gives_the_unstreamed_answer(client, lora_server, tmp_path):
    """gRPC: the adapter's streamed deltas (several chunks) join to its non-streamed answer; the
    OpenAI front's SSE stream for `<model>:<adapter>` gives the same text."""
    import openai

    sampling = SamplingParams(max_tokens=TOKENS, temperature=0.0, lora_task_id=1)
    messages = [ChatMessage("user", PROMPTS[1])]
    whole = client.generate(messages, sampling, stream=False)
    chunks = list(client.stream(messages, sampling))
    assert len(chunks) > 1 and "".join(c.text for c in chunks) == whole.text
    with running_front(lora_server.settings.grpc_url, tmp_path) as base:
        oai = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        events = list(oai.chat.completions.create(model=f"{MODEL}:concise", messages=[{"role": "user", "content": PROMPTS[1]}],
                                                  max_tokens=TOKENS, temperature=0, stream=True))
        assert "".join(e.choices[0].delta.content or "" for e in events if e.choices) == whole.text


def test_unknown_adapters_are_refused_naming_the_served_ones(client):
    with pytest.raises(InvalidRequestError, match=r"'lora_task_id' 7 is not a served LoRA adapter; served: 1 \(concise\), 2 \(playful\)"):
        client.generate("Hi", SamplingParams(max_tokens=2, lora_task_id=7))
    assert client.generate("Hi", SamplingParams(max_tokens=2)).completion_tokens == 2  # still serving


def test_the_openai_front_lists_and_selects_adapters(lora_server, client, tmp_path):
    import openai

    with running_front(lora_server.settings.grpc_url, tmp_path) as base:
        oai = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        assert [m.id for m in oai.models.list().data] == [MODEL, f"{MODEL}:concise", f"{MODEL}:playful"]
        answer = oai.chat.completions.create(model=f"{MODEL}:playful", messages=[{"role": "user", "content": PROMPTS[0]}],
                                             max_tokens=TOKENS, temperature=0)
        grpc = client.generate([ChatMessage("user", PROMPTS[0])],
                               SamplingParams(max_tokens=TOKENS, temperature=0.0, lora_task_id=2))
        assert answer.choices[0].message.content == grpc.text
        with pytest.raises(openai.NotFoundError, match="concise"):
            oai.chat.completions.create(model=f"{MODEL}:nope", messages=[{"role": "user", "content": "Hi"}], max_tokens=2)


def test_a_lora_dir_without_adapters_fails_naming_the_field(default_engine, tmp_path):
    from contract.lora import LoraError

    (tmp_path / "empty").mkdir()
    with pytest.raises(LoraError, match="'lora_dir'.*no adapter"):
        render_repository(default_engine, tmp_path / "repo", lora_dir=tmp_path / "empty")
    (tmp_path / "bad" / "x").mkdir(parents=True)
    (tmp_path / "bad" / "x" / "adapter_config.json").write_text(json.dumps({"r": 8}))
    with pytest.raises(LoraError, match="needs adapter_config.json and adapter_model.safetensors"):
        render_repository(default_engine, tmp_path / "repo", lora_dir=tmp_path / "bad")


def test_the_pytorch_layout_serves_the_adapters_as_the_cpu_engine_does(pytorch_engine, unfused_engine, lora_dir,
                                                                        client, serve, tmp_path_factory, tmp_path):
    """The PyTorch backend with the same adapters (LLM(lora_config=LoraConfig(lora_dir=...)),
    LoRARequest per request: row llm.lora), on its LLM-API stand-in, which generates with the
    CPU engine: every adapter's greedy answers equal the CPU layout's, through the gRPC client
    and the OpenAI front (`<model>:<adapter>`, listed by /v1/models); unknown ids are refused."""
    import openai

    from standins.links import use_standin_llmapi

    repo = tmp_path_factory.mktemp("pytorch-lora") / "repository"
    render_repository(pytorch_engine, repo, lora_dir=lora_dir)
    server = serve(repo, use_standin_llmapi(repo, unfused_engine))
    with LlmClient(server.settings.grpc_url) as pytorch_client:
        for task_id in (None, 1, 2):
            assert _served(pytorch_client, task_id) == _served(client, task_id), task_id
        with pytest.raises(InvalidRequestError, match=r"'lora_task_id' 7 is not a served LoRA adapter"):
            pytorch_client.generate("Hi", SamplingParams(max_tokens=2, lora_task_id=7))
    with running_front(server.settings.grpc_url, tmp_path) as base:
        oai = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        assert [m.id for m in oai.models.list().data] == [MODEL, f"{MODEL}:concise", f"{MODEL}:playful"]
        answer = oai.chat.completions.create(model=f"{MODEL}:concise", messages=[{"role": "user", "content": PROMPTS[0]}],
                                             max_tokens=TOKENS, temperature=0)
    cpu = client.generate([ChatMessage("user", PROMPTS[0])], SamplingParams(max_tokens=TOKENS, temperature=0.0,
                                                                           lora_task_id=1))
    assert answer.choices[0].message.content == cpu.text


def test_the_engine_flow_layout_serves_prefetched_adapters_on_the_stand_in(unfused_engine, lora_dir, client, serve,
                                                                          references, tmp_path_factory):
    """The GPU engine flow's LoRA (build_engines/trtllm/lora.py) on the stand-in of the C++
    backend: the adapters converted as NVIDIA's hf_lora_convert.py converts them (float16, its
    stand-in standins/trtllm/hf_lora_convert.py) into lora_prefetch_dir, loaded by the stand-in's
    LoRA cache (rows lora.*).  Through the ensemble each adapter follows the PEFT reference
    with the CPU layout's criterion and changes the answers; the base model's answers equal the
    CPU layout's (less the end token, which this layout does not return).  Converted at
    float32 the tasks give exactly the PEFT adapters' answers (measured in-process, 8 of 8);
    float16 storage, TensorRT-LLM's for an FP16 engine, rounds the adapters: measured, 2 of
    the 8 adapter answers part from the CPU layout's (one at its first token, a near tie).  A
    task the cache does not hold, sent straight to tensorrt_llm, fails with upstream's text.
    The OpenAI front lists the adapters and streams one's answer as the gRPC client gets it."""
    from standins.trtllm import upstream
    from standins.trtllm.hf_lora_convert import convert
    from standins.trtllm.repository import render_standin_repository

    prefetch = tmp_path_factory.mktemp("prefetch")
    for task_id, name in enumerate(sorted(ADAPTERS), 1):
        convert(upstream.semantics(), lora_dir / name, prefetch / str(task_id), "float16")
    repo = tmp_path_factory.mktemp("standin-lora") / "repository"
    render_standin_repository(unfused_engine, repo, lora_dir=lora_dir, prefetch_dir=prefetch)
    server = serve(repo)
    cpu_base = [[t for t in answer if t != EOS] for answer in _served(client, None)]
    check_engine_flow_adapters(server.settings.grpc_url, references, cpu_base, tmp_path_factory.mktemp("front"))


def check_engine_flow_adapters(grpc_url: str, references: dict[str, list[list[int]]], base_expected, front_dir: Path) -> None:
    """The engine flow's LoRA through the ensemble (stand-in or C++ backend): the base model
    answers `base_expected` (when given); each adapter follows the PEFT reference with the
    CPU layout's criterion and changes the answers; the OpenAI front lists the adapters and
    streams one's answer as the gRPC client gets it; an uncached task, sent straight to
    tensorrt_llm, fails with upstream's text (row error.lora_not_cached)."""
    import openai
    import tritonclient.grpc as grpcclient

    from contract import names

    with LlmClient(grpc_url) as served_client:
        base = _served(served_client, None)
        if base_expected is not None:
            assert base == base_expected
        for task_id, name in enumerate(sorted(ADAPTERS), 1):
            served = _served(served_client, task_id)
            agreement = [_agreement(s, r) for s, r in zip(served, references[name])]
            assert sum(a >= 4 for a in agreement) >= 2, (name, agreement)
            assert sum(s != b for s, b in zip(served, base)) >= 1, name
        grpc_text = served_client.generate([ChatMessage("user", PROMPTS[0])],
                                           SamplingParams(max_tokens=TOKENS, temperature=0.0, lora_task_id=2)).text
    with running_front(grpc_url, front_dir) as base_url:
        oai = openai.OpenAI(base_url=base_url + "/v1", api_key="none", max_retries=0)
        assert [m.id for m in oai.models.list().data] == [MODEL, f"{MODEL}:concise", f"{MODEL}:playful"]
        events = oai.chat.completions.create(model=f"{MODEL}:playful", messages=[{"role": "user", "content": PROMPTS[0]}],
                                             max_tokens=TOKENS, temperature=0, stream=True)
        assert "".join(e.choices[0].delta.content or "" for e in events if e.choices) == grpc_text
    inputs = []
    for name, value in (("input_ids", np.array([[1, 2, 3]], np.int32)), ("input_lengths", np.array([[3]], np.int32)),
                        ("request_output_len", np.array([[2]], np.int32)), ("lora_task_id", np.array([[9]], np.uint64))):
        tensor = grpcclient.InferInput(name, list(value.shape), "UINT64" if value.dtype == np.uint64 else "INT32")
        tensor.set_data_from_numpy(value)
        inputs.append(tensor)
    errors: list = []
    grpc = grpcclient.InferenceServerClient(grpc_url)  # tensorrt_llm is decoupled: a stream
    grpc.start_stream(callback=lambda result, error: errors.append(error))
    grpc.async_stream_infer(names.TRTLLM_ENGINE, inputs)
    grpc.stop_stream()
    grpc.close()
    assert len(errors) == 1 and re.search(r"Executor failed process requestId \d+ due to the following error: LoRA "
                                          r"task 9 not found in cache\. Please send LoRA weights with request",
                                          errors[0].message()), errors
