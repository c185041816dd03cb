"""A deployment with draft-model speculative decoding (`--draft-checkpoint`): the build exports
the draft beside the engine and refuses one with another vocabulary; served, streaming, stop
strings, guided decoding and cancellation work as without it, and n > 1 (which OpenVINO GenAI
refuses with assistant generation) is refused before the engine, naming it.  The draft here is
the default model's own first 2 layers (no smaller sibling is offline): a weak draft, so
answers and speed are not asserted (measured: build_engines/spec.py, OpenVinoOptions)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from build_engines.openvino.build import build_openvino_engine
from build_engines.process import BuildError
from build_engines.repository import render_repository
from build_engines.spec import BuildSpec
from build_engines.openvino.options import OpenVinoOptions
from build_engines.fidelity.options import FidelityOptions
from client import ChatMessage, Guide, InvalidRequestError, LlmClient, SamplingParams
from contract.model_configs import DRAFT_SUBDIR
from tests.integration.test_prompt_lookup import EXACTNESS_PROMPTS, LONG_ANSWER

pytestmark = [pytest.mark.server, pytest.mark.slow]

PROMPT = [ChatMessage("user", "Name three colours.")]


def truncated_checkpoint(source: Path, layers: int, out: Path) -> Path:
    """The checkpoint's first `layers` decoder layers, with its embeddings, norm and head."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(source, torch_dtype=torch.float32)
    model.model.layers = model.model.layers[:layers]
    model.config.num_hidden_layers = layers
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = model.config.layer_types[:layers]
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(source).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def draft_engine(default_checkpoint, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("draft")
    draft = truncated_checkpoint(default_checkpoint, 2, root / "draft-checkpoint")
    spec = BuildSpec(checkpoint=default_checkpoint, openvino=OpenVinoOptions(draft_checkpoint=str(draft)),
                     fidelity=FidelityOptions(evaluation="off"))
    engine = root / "engine"
    build_openvino_engine(spec, engine)
    return engine


def test_the_build_exports_the_draft_and_records_it(draft_engine):
    assert (draft_engine / DRAFT_SUBDIR / "openvino_model.xml").is_file()
    record = json.loads((draft_engine / "build.json").read_text())
    assert record["spec"]["openvino"]["draft_checkpoint"].endswith("draft-checkpoint")
    assert record["spec"]["openvino"]["kv_cache_precision"] == "f32"  # the default: exact answers
    # Fused like the target (build_engines/openvino/fusion.py): 2 layers, q/k/v and gate/up each.
    assert record["fusion"]["draft"]["groups"] == {"k_proj+q_proj+v_proj": 2, "gate_proj+up_proj": 2}


def test_a_draft_with_another_vocabulary_is_refused(default_checkpoint, tmp_path):
    from transformers import AutoTokenizer

    draft = tmp_path / "other"
    draft.mkdir()
    (draft / "config.json").write_text((default_checkpoint / "config.json").read_text())
    tok = AutoTokenizer.from_pretrained(default_checkpoint)
    tok.add_tokens(["<not-in-the-target>"])
    tok.save_pretrained(draft)
    spec = BuildSpec(checkpoint=default_checkpoint, openvino=OpenVinoOptions(draft_checkpoint=str(draft)),
                     fidelity=FidelityOptions(evaluation="off"))
    with pytest.raises(BuildError, match="'draft_checkpoint'.*tokenizer vocabulary"):
        build_openvino_engine(spec, tmp_path / "engine")
    with pytest.raises(Exception, match="exclusive"):
        replace(spec.openvino, prompt_lookup=True).validate()


@pytest.fixture(scope="module")
def client(draft_engine, serve, tmp_path_factory):
    repo = tmp_path_factory.mktemp("draft-repo") / "repository"
    render_repository(draft_engine, repo)
    server = serve(repo)
    with LlmClient(server.settings.grpc_url) as c:
        c.server = server
        yield c


def test_greedy_answers_equal_plain_decoding(client, draft_engine, default_checkpoint):
    """Token for token against the target's IR decoding plainly with the served numerics
    (OpenVINO GenAI driven directly; f32 KV cache, build_engines/openvino/precision.py)."""
    from transformers import AutoTokenizer

    from tests.integration.direct_engine import chat_ids, direct_pipeline, greedy, served_parameters

    tok = AutoTokenizer.from_pretrained(str(default_checkpoint))
    pipe = direct_pipeline(draft_engine, served_parameters(client.server.settings.repository))
    for n, messages in enumerate((PROMPT, EXACTNESS_PROMPTS[1], LONG_ANSWER)):
        served = client.generate(messages, SamplingParams(max_tokens=96, temperature=0.0))
        assert list(served.token_ids) == greedy(pipe, n, chat_ids(tok, messages), 96), f"prompt {n}"


def test_min_tokens_is_refused_naming_why(client):
    with pytest.raises(InvalidRequestError, match=r"'min_tokens' \(8\).*draft-model speculative decoding"):
        client.generate(PROMPT, SamplingParams(max_tokens=16, min_tokens=8, temperature=0.0))


def test_streamed_text_is_the_whole_answer_and_stops_cut_it(client):
    sampling = SamplingParams(max_tokens=48, temperature=0.0)
    whole = client.generate(PROMPT, sampling)
    assert "".join(chunk.text for chunk in client.stream(PROMPT, sampling)) == whole.text
    assert whole.completion_tokens > 4
    word = whole.text.split()[1]
    cut = client.generate(PROMPT, replace(sampling, stop=(word,)))
    assert word not in cut.text and cut.finish_reason == "stop"


def test_guided_decoding_and_n_refusal(client):
    answer = client.generate("Pick a number.", SamplingParams(max_tokens=8, temperature=0.0, guide=Guide("regex", "[1-9][0-9]?")))
    assert answer.text.isdigit()
    with pytest.raises(InvalidRequestError, match=r"'num_return_sequences'.*draft-model speculative decoding"):
        client.generate_n("Hi", SamplingParams(max_tokens=4, n=2, temperature=1.0))


def test_a_cancelled_stream_frees_the_engine(client):
    from serving import prometheus

    from contract.metrics import REQUESTS_RUNNING

    stream = client.stream(LONG_ANSWER, SamplingParams(max_tokens=300, temperature=0.0))  # min_tokens is refused
    next(stream)
    stream.close()
    url = client.server.settings.metrics_url
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and prometheus.value(prometheus.scrape(url), REQUESTS_RUNNING.name) != 0:
        time.sleep(0.25)
    assert prometheus.value(prometheus.scrape(url), REQUESTS_RUNNING.name) == 0
    assert client.generate(PROMPT, SamplingParams(max_tokens=4, temperature=0.0)).completion_tokens == 4
