"""The GPU repository layout around a CPU engine, with `tensorrt_llm` served by the stand-in
for the C++ backend (standins.trtllm): what `render_repository` renders for a
TensorRT-LLM engine - preprocessing, engine_relay -> tensorrt_llm, postprocessing, llm_bls,
ensemble - composed from the same parts, so CPU tests run the GPU wiring.

The stand-in's config is the one `tensorrt_llm_config` renders for the GPU, with only
`backend` changed to "python": inputs, outputs, reshapes, ragged batching, parameters,
decoupled mode and the queue policy are exactly what the C++ backend gets.  Its model.py
imports standins.trtllm.model, which the stub finds through a link to `standins` in the model's
directory (standins/links.py): a test repository, never one an image serves.

    python -m standins.trtllm.repository build/engines/<cpu-engine> build/standin-repository
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from build_engines.render import RenderedModel, ensemble_config, write_repository
from build_engines.repository import text_models
from build_engines.spec import BuildSpec
from build_engines.spec_base import EngineBackend, Precision
from build_engines.trtllm.options import DraftTargetOptions
from build_engines.trtllm.repository import bls_model, draft_relay, trtllm_engine_models
from build_engines.trtllm.lora import TrtLlmLora, lora_options, served
from build_engines.trtllm.options import SpeculativeDecoding, TrtLlmOptions, TrtLlmServing
from contract import names
from contract.build_record import BuildRecord
from standins.links import link_package
from standins.trtllm.settings import STANDIN_MAX_DRAFT_LEN

STANDIN_ADAPTER = "standins.trtllm.model"
PYTHON_BACKEND = "python"


class StandinRenderError(ValueError):
    pass


def _cpu_spec(engine_dir: Path) -> BuildSpec:
    record = BuildRecord.read(engine_dir)
    if record.backend != EngineBackend.OPENVINO.value:
        raise StandinRenderError(f"{engine_dir} is a {record.backend} engine; the stand-in runs the CPU engine")
    return BuildSpec.from_dict(record.spec)


def standin_spec(engine_dir: Path, serving: TrtLlmServing | None = None, lora: TrtLlmLora | None = None,
                 draft: DraftTargetOptions | None = None) -> BuildSpec:
    """The TensorRT-LLM spec the GPU path would render for the CPU engine's limits (an FP16
    engine: the dtype of the LoRA tasks it prefetches, standins.trtllm.lora_cache);
    `draft`: draft-target decoding, its draft_checkpoint a CPU engine."""
    spec = _cpu_spec(engine_dir)
    speculative = SpeculativeDecoding.DRAFT_TOKENS_EXTERNAL if draft else SpeculativeDecoding.NONE
    return dataclasses.replace(spec, backend=EngineBackend.TENSORRT_LLM, precision=Precision.FP16,
                               trtllm=TrtLlmOptions(serving=serving or TrtLlmServing(), lora=lora or TrtLlmLora(),
                                                    speculative_decoding=speculative,
                                                    draft_target=draft or DraftTargetOptions()))


def standin_engine_models(engine_dir: Path, spec: BuildSpec, prefetch_dir: Path | None = None) -> list[RenderedModel]:
    """The GPU's engine step (engine_relay + tensorrt_llm), the latter served by the stand-in;
    `prefetch_dir` replaces the engine's own lora_prefetch_dir (<engine>/lora on a GPU)."""
    models = []
    draft_name, max_draft_len = draft_relay(spec)
    for model in trtllm_engine_models(engine_dir, spec, engine_dir):  # the CPU engine holds its tokenizer
        if model.config.name in (names.TRTLLM_ENGINE, draft_name):
            config = type(model.config)()
            config.CopyFrom(model.config)
            config.backend = PYTHON_BACKEND
            if model.config.name == draft_name:  # the draft's CPU engine
                config.parameters["gpt_model_path"].string_value = spec.trtllm.draft_target.draft_checkpoint
            elif max_draft_len:
                config.parameters[STANDIN_MAX_DRAFT_LEN].string_value = str(max_draft_len)
            if prefetch_dir is not None and model.config.name == names.TRTLLM_ENGINE:
                config.parameters["lora_prefetch_dir"].string_value = str(prefetch_dir.resolve())
            model = RenderedModel(config, STANDIN_ADAPTER)
        models.append(model)
    return models


def standin_models(engine_dir: Path, serving: TrtLlmServing | None = None, lora_dir: Path | None = None,
                   prefetch_dir: Path | None = None, draft_engine_dir: Path | None = None,
                   max_draft_len: int = DraftTargetOptions.max_draft_len) -> list[RenderedModel]:
    """`lora_dir`: the PEFT adapters the engine would be built for (names, modules, rank), with
    `prefetch_dir` holding them converted by hf_lora_convert.py (<task id>/model.lora_*.npy,
    task ids in name order from 1), which a GPU build writes into <engine>/lora.
    `draft_engine_dir`: draft-target decoding (build_engines/trtllm/draft_target.py) with this
    CPU engine as `tensorrt_llm_draft` (a GPU build puts the draft engine in <engine>/draft)."""
    engine_dir = engine_dir.resolve()
    lora = lora_options(lora_dir) if lora_dir is not None else None
    if (lora is None) != (prefetch_dir is None):
        raise StandinRenderError("'lora_dir' and 'prefetch_dir' go together (the adapters and their converted tasks)")
    draft = None
    if draft_engine_dir is not None:
        _cpu_spec(draft_engine_dir)
        draft = DraftTargetOptions(str(draft_engine_dir.resolve()), max_draft_len)
    spec = standin_spec(engine_dir, serving, lora, draft)
    batch = spec.limits.max_batch_size
    record = BuildRecord.read(engine_dir)  # the CPU engine's: it holds the tokenizer and stands in for the engine
    models = (text_models(engine_dir, spec, record, served(lora) if lora else None)
              + standin_engine_models(engine_dir, spec, prefetch_dir))
    models.append(bls_model(engine_dir, names.TRTLLM_ENGINE, batch, first_token_timeout_s=spec.trtllm.serving.queue_timeout_s,
                            draft=draft_relay(spec)))
    models.append(RenderedModel(ensemble_config(names.ENGINE_RELAY, batch), None))
    return models


def render_standin_repository(engine_dir: Path, out_dir: Path, serving: TrtLlmServing | None = None,
                              lora_dir: Path | None = None, prefetch_dir: Path | None = None,
                              draft_engine_dir: Path | None = None,
                              max_draft_len: int = DraftTargetOptions.max_draft_len) -> list[str]:
    models = standin_models(engine_dir, serving, lora_dir, prefetch_dir, draft_engine_dir, max_draft_len)
    write_repository(models, out_dir)
    for model in models:
        if model.adapter == STANDIN_ADAPTER:
            link_package(out_dir / model.config.name)
    return [m.config.name for m in models]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine_dir", type=Path, help="a built CPU engine (build.json inside)")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--no-chunked-context", action="store_true", help="enable_chunked_context false")
    parser.add_argument("--max-queue-size", type=int, default=0, help="dynamic_batching default_queue_policy")
    parser.add_argument("--lora-dir", type=Path, help="PEFT adapters (with --lora-prefetch-dir: their converted tasks)")
    parser.add_argument("--lora-prefetch-dir", type=Path, help="hf_lora_convert.py's output per task id")
    parser.add_argument("--draft-engine-dir", type=Path, help="draft-target decoding with this CPU engine as the draft")
    parser.add_argument("--max-draft-len", type=int, default=DraftTargetOptions.max_draft_len,
                        help="the target's max_draft_len (with --draft-engine-dir)")
    args = parser.parse_args(argv)
    serving = TrtLlmServing(enable_chunked_context=not args.no_chunked_context, max_queue_size=args.max_queue_size)
    print(" ".join(render_standin_repository(args.engine_dir, args.out_dir, serving, args.lora_dir,
                                             args.lora_prefetch_dir, args.draft_engine_dir, args.max_draft_len)))


if __name__ == "__main__":
    main()
