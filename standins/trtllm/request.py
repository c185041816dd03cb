"""One Triton request -> executor requests, as the C++ backend parses it (utils.cc
readInputsTensors / createRequestsFromInputTensors; rows cited per step).

Input: the request's tensors as numpy arrays, batch dimension first (what the Python
backend hands over).  Output: one ExecutorRequest per row, or an UpstreamError with the text
the backend would send; StandinLimitation for what upstream serves but the CPU engine cannot.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from contract.upstream.backend_semantics import BackendSemantics
from contract.features import ENGINE_INPUT_FEATURES, EngineFeatures, Feature, refusals, with_guided_decoding, with_lora
from contract.guided import guide_problems
from model_repository.engine_step.engine_inputs import EngineInputs, GenerationOptions
from standins.trtllm.upstream import StandinLimitation, error

STOP = "stop"
STREAMING = "streaming"
# Row stop.inputs_skipped: never turned into executor tensors.
SKIPPED = frozenset({"START", "CORRID", "END", STOP, STREAMING})
# Inputs the stand-in maps onto the CPU engine; a row of them is honoured as upstream does.
ENGINE_FIELDS = {"runtime_top_k": int, "runtime_top_p": float, "temperature": float, "repetition_penalty": float,
                 "presence_penalty": float, "frequency_penalty": float, "min_tokens": int, "seed": int}
# Beam-search-only controls: without beam search (max_beam_width 1) upstream ignores them.
BEAM_ONLY = frozenset({"len_penalty", "early_stopping", "beam_search_diversity_rate"})
KNOWN = frozenset({"input_ids", "input_lengths", "request_output_len", "end_id", "pad_id", "beam_width",
                   "stop_words_list", "bad_words_list", "return_log_probs", "exclude_input_in_output",
                   "draft_input_ids"}
                  | set(ENGINE_FIELDS) | BEAM_ONLY
                  | set(ENGINE_INPUT_FEATURES))  # accepted at their neutral values (an empty embedding_bias, ...)


@dataclass(frozen=True)
class ExecutorRequest:
    """One row: what the CPU engine runs, plus what upstream keeps beside it."""

    inputs: EngineInputs  # prompt, limits, sampling, stop words, streaming, return_log_probs
    end_id: int | None  # None: unset (row input.end_id)
    beam_width: int
    exclude_input_in_output: bool
    lora_task_id: int | None = None  # input.lora_task_id: the LoRA cache's task (None: the base model)
    lora_error: str = ""  # the row of an error the executor answers when it fetches the request
    # input.draft_input_ids: how many draft tokens the target verifies.  The CPU engine decodes
    # the target's own tokens, which is what a greedy draft-target step outputs; the drafts
    # only decide how many steps that takes on a GPU.
    draft_len: int = 0


def bool_input(arrays: Mapping[str, np.ndarray], name: str) -> bool:
    """Row stop.bool_input_absent: absent -> false; otherwise the first element."""
    array = arrays.get(name)
    return array is not None and array.size > 0 and bool(np.asarray(array).reshape(-1)[0])


def is_stop(arrays: Mapping[str, np.ndarray]) -> bool:
    return bool_input(arrays, STOP)  # row stop.detect


def parse_request(sem: BackendSemantics, arrays: Mapping[str, np.ndarray], *, decoupled: bool,
                  exclude_input_default: bool, guided: bool = False, lora: bool = False) -> list[ExecutorRequest]:
    """`guided`: the executor has a guided decoder (the settings' guided_decoding); `lora`: a
    LoRA cache (the settings' lora_prefetch_dir)."""
    tensors = {k: np.asarray(v) for k, v in arrays.items() if k not in SKIPPED}
    rows = _split_batch(sem, tensors)
    streaming = bool_input(arrays, STREAMING)  # row input.streaming
    if not decoupled and len(rows) > 1:
        raise error(sem, "error.batch_needs_decoupled")
    if streaming and not decoupled:
        raise error(sem, "error.streaming_needs_decoupled")
    return [_row_request(sem, row, streaming, exclude_input_default, guided, lora) for row in rows]


def _split_batch(sem: BackendSemantics, tensors: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Row request.batch_split (with error.missing_input_ids, error.input_ids_rank,
    error.input_lengths_for_batch)."""
    ids = tensors.get("input_ids")
    if ids is None:
        raise error(sem, "error.missing_input_ids")
    if ids.ndim != 2:
        raise error(sem, "error.input_ids_rank")
    batch = ids.shape[0]
    if batch <= 1:
        return [tensors]
    lengths = tensors.get("input_lengths")
    if lengths is None:
        raise error(sem, "error.input_lengths_for_batch")
    rows = []
    for b in range(batch):
        row = {k: v[b:b + 1] for k, v in tensors.items()}
        row["input_ids"] = ids[b:b + 1, : int(lengths.reshape(batch, -1)[b, 0])]
        rows.append(row)
    return rows


def _scalar(sem: BackendSemantics, row: Mapping[str, np.ndarray], name: str, kind: type) -> Any:
    """extractOptionalSingleton: None when absent; error.scalar_size unless one element."""
    array = row.get(name)
    if array is None:
        return None
    if array.size != 1:
        raise error(sem, "error.scalar_size", name=name)
    return kind(array.reshape(-1)[0])


def _row_request(sem: BackendSemantics, row: Mapping[str, np.ndarray], streaming: bool,
                 exclude_input_default: bool, guided: bool, lora: bool) -> ExecutorRequest:
    return_log_probs = bool(_scalar(sem, row, "return_log_probs", bool) or False)  # input.return_log_probs
    exclude = _scalar(sem, row, "exclude_input_in_output", bool)  # input.exclude_input_in_output: request wins
    prompt = tuple(int(t) for t in row["input_ids"].reshape(-1))  # input.input_ids (whole row at batch 1)
    max_new = _scalar(sem, row, "request_output_len", int)
    if max_new is None:
        raise error(sem, "error.missing_request_output_len")
    end_id = _scalar(sem, row, "end_id", int)  # input.end_id
    _scalar(sem, row, "pad_id", int)  # input.pad_id: read (size-checked), not used by the CPU engine
    beam_width, sequences, sampling = _sampling(sem, row)
    bad_words = _word_list(sem, row, "bad_words_list")  # input.bad_words_list
    stop_words = _word_list(sem, row, "stop_words_list")  # input.stop_words_list
    inputs = EngineInputs(
        input_ids=prompt, input_lengths=len(prompt), request_output_len=max_new,
        end_id=-1 if end_id is None else end_id, stop_words_list=stop_words, bad_words_list=bad_words,
        return_log_probs=return_log_probs, streaming=streaming, exclude_input_in_output=True,
        options=dataclasses.replace(_guided_options(sem, row) if guided else GenerationOptions(),
                                    num_return_sequences=sequences), **sampling)
    task_id, lora_error = _lora_task(sem, row) if lora else (None, "")
    if lora:  # _lora_task has dealt with them (ignored, refused, or failed at fetch)
        row = {k: v for k, v in row.items() if k not in ("lora_weights", "lora_config")}
    _refuse_unsupported(row, inputs, guided, lora)
    draft = row.get("draft_input_ids")
    return ExecutorRequest(inputs, end_id, beam_width, exclude_input_default if exclude is None else exclude, task_id,
                           lora_error, 0 if draft is None else int(draft.size))


def _lora_task(sem: BackendSemantics, row: Mapping[str, np.ndarray]) -> tuple[int | None, str]:
    """getLoraConfigFromTensors (row input.lora_task_id): the task id, and the row of the error
    the executor will answer at fetch ("" for none).  Weights without a config fail here
    (error.lora_weights_without_config); a config without weights only when fetched
    (error.lora_config_without_weights); both together are refused by the stand-in."""
    task_id = _scalar(sem, row, "lora_task_id", int)
    if task_id is None:
        return None, ""
    weights, config = row.get("lora_weights") is not None, row.get("lora_config") is not None
    if weights and not config:
        raise error(sem, "error.lora_weights_without_config")
    if weights:  # upstream would put them in its cache under task_id (PeftCacheManager::addRequestPeft)
        raise StandinLimitation("'lora_weights' / 'lora_config': LoRA weights sent with a request are not implemented "
                                "(the CPU engine builds its adapters at start); put the converted task in "
                                "lora_prefetch_dir and send 'lora_task_id' alone")
    return task_id, "error.lora_config_without_weights" if config else ""


def _sampling(sem: BackendSemantics, row: Mapping[str, np.ndarray]) -> tuple[int, int, dict[str, Any]]:
    """getSamplingConfigFromTensors + SamplingConfig's checks (row error.sampling_config, in
    the constructor's order).  Unset fields take the decoding defaults (row
    sampling.executor_defaults): neither top-k nor top-p set is greedy (row sampling.greedy_rule),
    which EngineInputs.is_greedy and the CPU engine's generation_config implement."""
    beam_width = _scalar(sem, row, "beam_width", int)  # input.beam_width: default 1
    sequences = _scalar(sem, row, "num_return_sequences", int)  # input.num_return_sequences: default 1
    values = {name: _scalar(sem, row, name, kind) for name, kind in ENGINE_FIELDS.items()}
    if values["runtime_top_p"] is not None and values["runtime_top_p"] <= 0:
        values["runtime_top_p"] = None  # input.runtime_top_p: a value <= 0 is dropped
    checks = sem.rule("error.sampling_config").extra["checks"]
    failed = {"beam_width": beam_width is not None and beam_width <= 0,
              "runtime_top_k": (values["runtime_top_k"] or 0) < 0,
              "runtime_top_p": (values["runtime_top_p"] or 0.0) > 1.0,
              "temperature": (values["temperature"] or 0.0) < 0,
              "min_tokens": (values["min_tokens"] or 0) < 0,
              "repetition_penalty": values["repetition_penalty"] is not None and values["repetition_penalty"] <= 0,
              "num_return_sequences": sequences is not None and sequences <= 0}
    for field in checks:
        if failed.get(field):
            raise error(sem, "error.sampling_config", expression=checks[field])
    defaults = sem.rule("sampling.executor_defaults").extra["defaults"]
    resolved = {k: defaults[k] if v is None else v for k, v in values.items()}
    if resolved["temperature"] == 0 and not _is_greedy(resolved):
        # Upstream samples at temperature 0 (a division by ~0: argmax within top-k/top-p, not
        # read); the CPU engine cannot sample at 0, so the stand-in decodes greedily.
        resolved["runtime_top_k"] = 1
    return 1 if beam_width is None else beam_width, sequences or 1, resolved


def _is_greedy(s: Mapping[str, Any]) -> bool:
    return s["runtime_top_k"] == 1 or (s["runtime_top_k"] == 0 and s["runtime_top_p"] == 0.0)


def _string(row: Mapping[str, np.ndarray], name: str) -> str | None:
    array = row.get(name)
    if array is None or array.size == 0:
        return None
    value = array.reshape(-1)[0]
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _guided_options(sem: BackendSemantics, row: Mapping[str, np.ndarray]) -> GenerationOptions:
    """getGuidedDecodingParamsFromTensors (rows input.guided_decoding_guide_type,
    input.guided_decoding_guide): a guide type outside upstream's four leaves the request
    unguided, without an error; the guide is read only with a known type."""
    kind = _string(row, "guided_decoding_guide_type")
    if kind not in sem.rule("input.guided_decoding_guide_type").extra["values"]:
        return GenerationOptions()
    guide = "" if kind == "json" else (_string(row, "guided_decoding_guide") or "")  # kJSON ignores the guide
    if kind != "json" and not guide:
        # upstream hands the executor a guide type without a guide (what xgrammar then does was not read)
        raise StandinLimitation(f"guided_decoding_guide_type {kind!r} without a guided_decoding_guide is not implemented")
    problems = guide_problems(kind, guide)
    if problems:
        # upstream's executor compiles the guide on the GPU side (what it answers to one that
        # does not compile was not read); on the CPU engine a guide that does not compile
        # would fail every request's step, so it is refused here
        raise StandinLimitation(f"the {kind} guide cannot be enforced: {'; '.join(problems)}")
    return GenerationOptions(guided_decoding_guide_type=kind, guided_decoding_guide=guide)


def _word_list(sem: BackendSemantics, row: Mapping[str, np.ndarray], name: str) -> tuple[tuple[int, ...], ...]:
    array = row.get(name)
    return () if array is None else convert_word_list(sem, [int(v) for v in array.reshape(-1)])


def convert_word_list(sem: BackendSemantics, sparse: list[int]) -> tuple[tuple[int, ...], ...]:
    """utils.cc convertWordList over the flattened [2, n] list: ids, then end offsets padded
    with -1 (rows error.word_list_odd / _extra_pad / _offset_bound / _offset_order)."""
    ids = "".join(f"{v} " for v in sparse)  # sparseListToStr (row field ids_format)
    n = len(sparse)
    if n % 2:
        raise error(sem, "error.word_list_odd", ids=ids)
    num, current, words = n // 2, 0, []
    for i in range(num, n):
        if sparse[i] == -1:
            if any(v != -1 for v in sparse[i + 1:]):
                raise error(sem, "error.word_list_extra_pad", ids=ids)
            break
        if sparse[i] > num:
            raise error(sem, "error.word_list_offset_bound", ids=ids)
        if i != num and sparse[i] <= sparse[i - 1]:
            raise error(sem, "error.word_list_offset_order", ids=ids)
        words.append(tuple(sparse[current:max(current, sparse[i])]))
        current = max(current, sparse[i])
    return tuple(words)


# n samples per prompt: the CPU engine samples them (row output.sequence_results says how upstream answers).
STANDIN_ENGINE = EngineFeatures("the CPU stand-in of tensorrt_llm (generation by OpenVINO GenAI)",
                                frozenset({Feature.MULTIPLE_SEQUENCES}))
# beam_width is upstream's to refuse (limit.beam_width_operating, error.beam_width_exceeds_max).
STANDIN_CHECKED = {k: v for k, v in ENGINE_INPUT_FEATURES.items() if k != "beam_width"}


def _refuse_unsupported(row: Mapping[str, np.ndarray], inputs: EngineInputs, guided: bool, lora: bool) -> None:
    unknown = sorted(set(row) - KNOWN)
    if unknown:
        raise StandinLimitation(f"input {unknown[0]!r} is not implemented")
    # What the CPU engine under the stand-in cannot honour (bad words, LoRA weights, ...), which the
    # C++ backend would: the stand-in's own refusal, never an upstream text.
    engine = with_guided_decoding(STANDIN_ENGINE) if guided else STANDIN_ENGINE
    engine = with_lora(engine) if lora else engine
    for name, reason in refusals(row, engine, STANDIN_CHECKED):
        raise StandinLimitation(f"'{name}' {reason}")
