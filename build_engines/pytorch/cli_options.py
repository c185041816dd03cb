"""TensorRT-LLM's PyTorch backend's (`--backend tensorrt_llm_pytorch`) own build options: their
command-line declarations, the PyTorchOptions they make together with the options both GPU flows
read (from_options), and what the other backends refuse of them.  What this backend refuses of
the engine flow's options is build_engines/trtllm/cli_options.py's refuse_elsewhere; the GPU
flows' shared options are build_engines/cli_options.py's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from build_engines.option_lists import EXISTING_DIR, Option, enum_option
from build_engines.pytorch.sampler import SamplerChoice, parse_sampling_fields
from build_engines.pytorch.spec import PyTorchOptions, PyTorchServing
from build_engines.pytorch.speculative import PyTorchSpecMode, PyTorchSpeculative
from build_engines.spec_base import EngineBackend, SpecError
from build_engines.trtllm.options import DraftTargetOptions, GpuFlowFields, GpuServingFields

_SPECULATIVE = PyTorchSpeculative()

OPTIONS: list[Option] = [
    enum_option(
        "--pt-speculative-decoding",
        default=PyTorchSpecMode.NONE,
        help="[tensorrt_llm_pytorch] the LLM API's speculative_config: ngram (prompt "
        "lookup), draft_target (--speculative-model-dir: a draft model with the "
        "target's tokenizer) or eagle3 (--speculative-model-dir: Eagle3 heads).",
    ),
    click.option(
        "--max-draft-len",
        type=int,
        default=None,
        help=f"[tensorrt_llm_pytorch speculative] draft tokens per step (default "
        f"{_SPECULATIVE.max_draft_len}); [tensorrt_llm draft_tokens_external] the target "
        f"engine's --max_draft_len, the most num_draft_tokens a request may ask for (default "
        f"{DraftTargetOptions().max_draft_len}).",
    ),
    click.option(
        "--max-matching-ngram-size",
        type=int,
        default=_SPECULATIVE.max_matching_ngram_size,
        help="[tensorrt_llm_pytorch ngram] longest n-gram matched in the prompt.",
    ),
    click.option(
        "--speculative-model-dir",
        type=EXISTING_DIR,
        default=None,
        help="[tensorrt_llm_pytorch draft_target/eagle3] the draft model or the Eagle3 heads checkpoint.",
    ),
    click.option(
        "--sampler",
        type=click.Choice(["auto", "torch", "trtllm"]),
        default="auto",
        help="[tensorrt_llm_pytorch] LLM(sampler_type=...): torch (TorchSampler, upstream's default), trtllm "
        "(TRTLLMSampler: applies penalties, bad words and seeds at 1.2.1; no speculative decoding, no "
        "top_logprobs), auto: the one that applies every --sampling-fields field (docs/pytorch-backend.md).",
    ),
    click.option(
        "--sampling-fields",
        default="",
        show_default=False,  # none
        metavar="F1,F2",
        help="[tensorrt_llm_pytorch] sampling fields the deployment must apply (repetition_penalty, "
        "presence_penalty, frequency_penalty, seed, bad_words, ...); --sampler auto picks the sampler by them.",
    ),
]


def from_options(
    *,
    gpu_flow: GpuFlowFields,
    gpu_serving: GpuServingFields,
    kv_cache_reuse: bool,
    chunked_context: bool,
    pt_speculative_decoding: str,
    max_draft_len: int | None,
    max_matching_ngram_size: int,
    speculative_model_dir: Path | None,
    sampler: str,
    sampling_fields: str,
    **_others: Any,
) -> PyTorchOptions:
    """The spec's `pytorch` section from the build options (make_spec's keywords) and the fields
    both GPU flows take from the common ones."""
    try:
        fields = parse_sampling_fields(sampling_fields)
    except ValueError as e:
        raise SpecError(str(e)) from None
    return PyTorchOptions(
        **gpu_flow,
        speculative=PyTorchSpeculative(
            mode=PyTorchSpecMode(pt_speculative_decoding),
            max_draft_len=_SPECULATIVE.max_draft_len if max_draft_len is None else max_draft_len,
            max_matching_ngram_size=max_matching_ngram_size,
            model_dir=str(speculative_model_dir.resolve()) if speculative_model_dir else "",
        ),
        sampler=SamplerChoice(sampler),
        sampling_fields=fields,
        serving=PyTorchServing(
            **gpu_serving, enable_block_reuse=kv_cache_reuse, enable_chunked_prefill=chunked_context
        ),
    )


def refuse_elsewhere(
    backend: EngineBackend,
    *,
    sampler: str,
    sampling_fields: str,
    pt_speculative_decoding: str,
    max_draft_len: int | None,
    max_matching_ngram_size: int,
    speculative_model_dir: Path | None,
    **_others: Any,
) -> None:
    """What the other backends refuse of these options, naming them and their own (tensorrt_llm
    reads --max-draft-len for draft_tokens_external)."""
    if backend == EngineBackend.TENSORRT_LLM_PYTORCH:
        return
    if sampler != SamplerChoice.AUTO.value or sampling_fields:
        raise SpecError("'sampler' and 'sampling_fields' configure --backend tensorrt_llm_pytorch")
    if (
        pt_speculative_decoding != PyTorchSpecMode.NONE.value
        or speculative_model_dir is not None
        or (max_draft_len is not None and backend != EngineBackend.TENSORRT_LLM)
        or max_matching_ngram_size != _SPECULATIVE.max_matching_ngram_size
    ):
        raise SpecError(
            "'pt_speculative_decoding', 'max_draft_len', 'max_matching_ngram_size' and "
            "'speculative_model_dir' configure --backend tensorrt_llm_pytorch; on tensorrt_llm use "
            "--speculative-decoding lookahead_decoding --lookahead W,N,G, --speculative-decoding eagle "
            "--eagle-model-dir DIR or --speculative-decoding draft_tokens_external --draft-checkpoint DIR "
            "[--max-draft-len N]"
        )
