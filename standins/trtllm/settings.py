"""The model's settings read as the C++ backend reads them, and the engine limits the
executor derives from the engine.

Parameters (rows param.*): upstream's ModelState::GetParameter<T> reads
`parameters.<key>.string_value` and converts it with std::stoi / std::stof / its own bool
table (row param.parsing).  Keys read inside a try block fall back to the row's default on
any failure (absent, unparsable, an unfilled ${placeholder}); keys the rows mark required are
read outside one, so their absence fails the load with upstream's text (row
param.load_failure).  The queue bound is not a parameter: it is
dynamic_batching.default_queue_policy.max_queue_size (row limit.max_queue_size_source), and
decoupled mode is model_transaction_policy.decoupled (row param.decoupled).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from contract.build_record import BuildRecord
from contract.upstream.backend_semantics import BackendSemantics
from standins.trtllm.upstream import StandinLimitation, exception_text, load_failure

log = logging.getLogger(__name__)

_INT = re.compile(r"\s*[+-]?\d+")  # what std::stoi accepts: a prefix
_FLOAT = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")  # std::stof's decimal prefix


class ParameterError(ValueError):
    pass


def _stoi(text: str) -> int:
    match = _INT.match(text)
    if not match:
        raise ParameterError(f"stoi: no conversion of {text!r}")
    value = int(match.group())
    if not -2**31 <= value < 2**31:
        raise ParameterError(f"stoi: {text!r} out of range")
    return value


def _stof(text: str) -> float:
    match = _FLOAT.match(text)
    if not match:
        raise ParameterError(f"stof: no conversion of {text!r}")
    return float(match.group())


def _bool(text: str) -> bool:
    if text in ("True", "true", "TRUE", "1"):
        return True
    if text in ("False", "false", "FALSE", "0"):
        return False
    raise ParameterError(f"Cannot convert {text} to a boolean.")


_CONVERT: dict[str, Callable[[str], Any]] = {"int": _stoi, "size_t": _stoi, "float": _stof, "bool": _bool, "string": str}


class ParameterReader:
    """upstream's GetParameter<T> over Triton's `parameters` map."""

    def __init__(self, sem: BackendSemantics, parameters: Mapping[str, Any]) -> None:
        self._sem = sem
        self._raw = parameters

    def text(self, key: str) -> str:
        if key not in self._raw:
            raise ParameterError(f"Cannot find parameter with name: {key}")
        entry = self._raw[key]
        return entry.get("string_value", "") if isinstance(entry, Mapping) else str(entry)

    def required(self, key: str) -> str:
        """A key read outside a try block: its absence fails the load."""
        try:
            return self.text(key)
        except ParameterError as e:
            raise load_failure(self._sem, str(e)) from None

    def value(self, key: str) -> Any:
        """A key read inside a try block: any failure gives the row's default."""
        param = self._sem.parameter(key)
        try:
            return _CONVERT[param.type](self.text(key))
        except (ParameterError, ValueError) as e:
            log.info("%s: %s; using the default %r", key, e, param.default)
            return param.default


@dataclass(frozen=True)
class StandinSettings:
    gpt_model_path: Path
    decoupled: bool
    max_queue_size: int  # 0: unbounded (row error.queue_full)
    exclude_input_in_output: bool
    enable_chunked_context: bool
    enable_kv_cache_reuse: bool
    batch_scheduler_policy: str
    max_beam_width: int
    cancellation_check_period_ms: int
    stats_check_period_ms: int
    guided_decoding: bool = False  # a GuidedDecodingConfig was built (row guided.config)
    # A LoRA cache with the tasks of this directory (row param.lora_prefetch_dir); None: no
    # LoRA, lora inputs refused
    lora_prefetch_dir: Path | None = None
    max_draft_len: int = 0  # STANDIN_MAX_DRAFT_LEN


# Not an upstream parameter: the C++ backend reads the target engine's max_draft_len from the
# engine (its config.json); the stand-in's CPU engine has none, so its layout renders it here.
STANDIN_MAX_DRAFT_LEN = "standin_engine_max_draft_len"


def load_settings(sem: BackendSemantics, config: Mapping[str, Any]) -> StandinSettings:
    """Settings from the model config (Triton's JSON of config.pbtxt); raises RuntimeError
    with upstream's load-failure text, or StandinLimitation for what the CPU engine lacks."""
    params = ParameterReader(sem, config.get("parameters", {}))
    _check_batching_type(sem, params.required("gpt_model_type"))
    guided = _guided_decoding(sem, params)
    policy = params.value("batch_scheduler_policy")
    if policy not in sem.rule("param.batch_scheduler_policy").extra["values"]:
        log.warning("batch_scheduler_policy %r is invalid; keeping the default", policy)
        policy = sem.parameter("batch_scheduler_policy").default
    settings = StandinSettings(
        gpt_model_path=Path(params.value("gpt_model_path")),
        decoupled=bool(config.get("model_transaction_policy", {}).get("decoupled", False)),
        max_queue_size=_max_queue_size(config),
        exclude_input_in_output=params.value("exclude_input_in_output"),
        enable_chunked_context=params.value("enable_chunked_context"),
        enable_kv_cache_reuse=params.value("enable_kv_cache_reuse"),
        batch_scheduler_policy=policy,
        max_beam_width=params.value("max_beam_width"),
        cancellation_check_period_ms=params.value("cancellation_check_period_ms"),
        stats_check_period_ms=params.value("stats_check_period_ms"),
        guided_decoding=guided,
        max_draft_len=int(config.get("parameters", {}).get(STANDIN_MAX_DRAFT_LEN, {}).get("string_value", "0")),
    )
    if settings.max_beam_width != 1:
        raise StandinLimitation(f"max_beam_width {settings.max_beam_width}: the CPU engine has no beam search")
    return dataclasses.replace(settings, **_lora_cache(params))


def _lora_cache(params: ParameterReader) -> dict[str, Any]:
    """getPeftCacheConfigFromParams (row param.lora_prefetch_dir): read inside a try, so an
    absent key is unset.  Upstream's LoRA cache exists whenever the engine has the LoRA plugin;
    the stand-in cannot see a plugin, so it serves LoRA exactly when a prefetch directory is
    named (an empty value or the unfilled placeholder: no LoRA), which the engine flow renders
    whenever it builds the plugin (build_engines/trtllm/lora.py cache_parameters)."""
    try:
        prefetch = params.text("lora_prefetch_dir")
    except ParameterError:
        prefetch = ""
    if _unset(prefetch, "lora_prefetch_dir"):  # the stand-in: no LoRA cache at all (see above)
        return {}
    return {"lora_prefetch_dir": Path(prefetch)}


def _check_batching_type(sem: BackendSemantics, value: str) -> None:
    row = sem.rule("param.gpt_model_type").extra
    kind = row["values"].get(value)
    if kind is None:
        raise load_failure(sem, row["invalid_message"])
    if kind != "inflight":
        raise StandinLimitation(f"gpt_model_type {value!r} (static batching) is not implemented")


def _guided_decoding(sem: BackendSemantics, params: ParameterReader) -> bool:
    """getGuidedDecodingConfigFromParams: the three keys are read outside any try (rows
    param.tokenizer_dir, param.xgrammar_tokenizer_info_path, param.guided_decoding_backend);
    empty values or unfilled placeholders leave guided decoding off (row guided.config).  Set,
    the info file must exist (guided.info_missing) and hold the keys of row
    guided.tokenizer_info, and the backend must be xgrammar (guided.backend_invalid), in
    that order; each failure fails the load.  The CPU engine under the stand-in then enforces
    the guides itself (OpenVINO GenAI compiles them with xgrammar too)."""
    params.required("tokenizer_dir")  # not used by the C++ workflow (an INFO log upstream)
    backend = params.required("guided_decoding_backend")
    info = params.required("xgrammar_tokenizer_info_path")
    if _unset(backend, "guided_decoding_backend") or _unset(info, "xgrammar_tokenizer_info_path"):
        return False
    if not Path(info).exists():
        raise load_failure(sem, exception_text(sem, "guided.info_missing", path=info))
    problem = _tokenizer_info_problem(sem, Path(info))
    if problem:  # nlohmann's own text upstream, which the stand-in does not reproduce
        raise load_failure(sem, f"tensorrt_llm stand-in: {info}: {problem}")
    if backend not in sem.rule("guided.config").extra["values"]:
        raise load_failure(sem, exception_text(sem, "guided.backend_invalid"))
    return True


def _unset(value: str, key: str) -> bool:
    """Empty, or the unfilled ${key} placeholder of NVIDIA's config template: not set."""
    return not value or value == "${" + key + "}"


def _tokenizer_info_problem(sem: BackendSemantics, path: Path) -> str:
    """What nlohmann's parse / get<> would throw on (row guided.tokenizer_info), in words."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return f"not JSON ({e})"
    checks = {"list[str]": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
              "str": lambda v: isinstance(v, str),
              "list[int]": lambda v: isinstance(v, list) and all(isinstance(x, int) and -2**31 <= x < 2**31 for x in v)}
    if not isinstance(data, dict):
        return "not a JSON object"
    for key, kind in sem.rule("guided.tokenizer_info").extra["keys"].items():
        if key not in data or not checks[kind](data[key]):
            return f"{key!r} must be a {kind}"
    return ""


def _max_queue_size(config: Mapping[str, Any]) -> int:
    """Row limit.max_queue_size_source: absent or unreadable -> 0 (unbounded)."""
    policy = config.get("dynamic_batching", {}).get("default_queue_policy", {})
    try:
        return int(policy.get("max_queue_size", 0))  # protobuf JSON carries int64 as a string
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True)
class EngineLimits:
    """What the executor takes from the engine (TensorRT-LLM reads them from the engine's
    config; the CPU engine's build.json records the same limits)."""

    max_batch_size: int
    max_seq_len: int
    max_num_tokens: int
    vocab_size_padded: int  # tp_size 1: the vocabulary size itself

    def max_input_len(self, sem: BackendSemantics, enable_chunked_context: bool) -> int:
        """Row limit.max_input_len: chunked context -> max_seq_len - 1; otherwise (context
        FMHA with packed input, the only engine the kit builds) min(max_seq_len - 1, max_num_tokens)."""
        formula = sem.rule("limit.max_input_len").extra["formula"]
        key = "chunked_context" if enable_chunked_context else "context_fmha_packed_input"
        names = {"max_seq_len": self.max_seq_len, "max_num_tokens": self.max_num_tokens, "min": min}
        return int(eval(formula[key], {"__builtins__": {}}, names))  # the row's own arithmetic


def engine_limits(engine_dir: Path) -> EngineLimits:
    record = BuildRecord.read(engine_dir)
    limits = record.spec["limits"]
    vocab_size = json.loads((engine_dir / "config.json").read_text())["vocab_size"]
    return EngineLimits(limits["max_batch_size"], limits["max_seq_len"], limits["max_num_tokens"], int(vocab_size))
