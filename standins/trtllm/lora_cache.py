"""The C++ backend's LoRA cache, as far as the stand-in reproduces it: the tasks
`lora_prefetch_dir` holds (TensorRT-LLM's converted tensors, one directory per task id) are
loaded at start as upstream loads them (row lora.prefetch, lora.prefetch_dtypes) and turned
back into PEFT adapters the CPU engine applies (row lora.tensor_layout).  Requests pick a task
with `lora_task_id`; one the cache does not hold fails when fetched (error.lora_not_cached, in
the executor).  Upstream also fills its cache at run time from a request's `lora_weights` +
`lora_config`; the CPU engine compiles its adapters into pipelines at start, so the stand-in
refuses those inputs by name (request.py).

Pure: numpy and safetensors only (no Triton, no OpenVINO), so tests drive it directly.
"""

from __future__ import annotations

import json
import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from contract import lora
from contract.upstream.backend_semantics import BackendSemantics
from standins.trtllm.upstream import load_failure

log = logging.getLogger(__name__)
# standin_spec renders the stand-in's engine as an FP16 TensorRT-LLM build: the model dtype a
# prefetched task must have (row lora.prefetch_dtypes)
STANDIN_MODEL_DTYPE = "float16"
_NUMPY = {"float16": "f2", "float32": "f4"}


@dataclass(frozen=True)
class ModelDims:
    """The widths LoRA modules map between (row lora.tensor_layout's names), from config.json."""

    hidden: int
    q: int
    kv: int
    mlp: int
    layers: int

    @classmethod
    def from_config(cls, config: Mapping) -> "ModelDims":
        heads = int(config["num_attention_heads"])
        head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
        return cls(int(config["hidden_size"]), heads * head_dim,
                   int(config.get("num_key_value_heads") or heads) * head_dim, int(config["intermediate_size"]),
                   int(config["num_hidden_layers"]))

    def width(self, name: str) -> int:
        return {"hidden": self.hidden, "q": self.q, "kv": self.kv, "mlp": self.mlp}[name]


@dataclass(frozen=True)
class Module:
    """One of TensorRT-LLM's LoRA module ids (row lora.tensor_layout `modules`)."""

    id: int
    trtllm: str  # attn_q, ...
    hf: str  # the Hugging Face module under a decoder layer: self_attn.q_proj, ...
    inp: str  # ModelDims.width names
    out: str


def modules(sem: BackendSemantics) -> dict[int, Module]:
    return {int(m["id"]): Module(int(m["id"]), m["trtllm"], m["hf"], m["in"], m["out"])
            for m in sem.rule("lora.tensor_layout").extra["modules"]}


@dataclass(frozen=True)
class CachedTask:
    task_id: int
    weights: np.ndarray  # [N, row]: A [r, in], then B [out, r] with the scale in it, then zeros
    config: np.ndarray  # [N, 3 or 4]: module id, layer, rank (, is_dora)


def _load(sem: BackendSemantics, path: Path) -> np.ndarray:
    """loadNpy: a missing file or a dtype it does not know fails the load (row lora.prefetch_dtypes)."""
    rule = sem.rule("lora.prefetch").extra
    if not path.is_file():
        raise load_failure(sem, rule["open_failure"].format(path=path))
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:  # not a .npy file: upstream's loadNpy text was not read
        raise load_failure(sem, f"tensorrt_llm stand-in: {path}: {e}") from None
    descr = array.dtype.str
    dtypes = sem.rule("lora.prefetch_dtypes").extra
    if descr.lstrip("<>=|") not in dtypes["npy_dtypes"]:  # e.g. '|V2': hf_lora_convert's bfloat16
        raise load_failure(sem, dtypes["unsupported_message"].format(descr=descr))
    return array


def read_task(sem: BackendSemantics, directory: Path, task_id: int, dims: ModelDims,
              model_dtype: str = STANDIN_MODEL_DTYPE) -> CachedTask:
    files = sem.rule("lora.prefetch").extra["files"]
    weights = _load(sem, directory / files["weights"])
    config = _load(sem, directory / files["config"])
    if weights.dtype.str.lstrip("<>=|") != _NUMPY.get(model_dtype):
        # upstream: the copy into the cache's pages (model dtype) checks "Incompatible data types"
        raise load_failure(sem, f"tensorrt_llm stand-in: {directory / files['weights']} holds {weights.dtype}, the "
                                f"engine is {model_dtype}: Incompatible data types (row lora.prefetch_dtypes)")
    weights = weights.reshape(weights.shape[-2:]) if weights.ndim >= 2 else weights
    config = config.reshape(config.shape[-2:]) if config.ndim >= 2 else config
    problem = _layout_problem(sem, weights, config, dims)
    if problem:  # what upstream's cache would do with such a task was not read: the stand-in refuses it
        raise load_failure(sem, f"tensorrt_llm stand-in: LoRA task {task_id} ({directory}): {problem}")
    return CachedTask(task_id, weights.astype(np.float32), config.astype(np.int64))


def _layout_problem(sem: BackendSemantics, weights: np.ndarray, config: np.ndarray, dims: ModelDims) -> str:
    if config.ndim != 2 or config.shape[1] not in (3, 4) or weights.ndim != 2:
        return f"expected weights [1, N, row] and config [1, N, 3 or 4], got {weights.shape} and {config.shape}"
    if weights.shape[0] != config.shape[0]:
        return f"{weights.shape[0]} weight rows for {config.shape[0]} config rows"
    known = modules(sem)
    for row in config.tolist():
        module_id, layer, rank = row[:3]
        if module_id not in known:  # upstream: moduleIdToModule.at() throws std::out_of_range
            return f"module id {module_id} is not one of {sorted(known)} (row lora.tensor_layout)"
        if len(row) == 4 and row[3]:
            return "DoRA rows (is_dora 1) are not implemented"
        m = known[module_id]
        need = rank * (dims.width(m.inp) + dims.width(m.out))
        if rank <= 0 or need > weights.shape[1]:
            return f"{m.trtllm} of layer {layer}: rank {rank} needs {need} values per row, the rows hold {weights.shape[1]}"
    return ""


def prefetch(sem: BackendSemantics, directory: Path, dims: ModelDims,
             model_dtype: str = STANDIN_MODEL_DTYPE) -> dict[int, CachedTask]:
    """Row lora.prefetch: every directory named by digits is a task (std::stoi of its name);
    others are skipped with upstream's warning, plain files ignored; a missing directory
    leaves the cache empty (a debug log)."""
    rule = sem.rule("lora.prefetch").extra
    if not directory.is_dir():
        log.debug(rule["missing_debug"].format(path=directory))
        return {}
    tasks: dict[int, CachedTask] = {}
    for entry in sorted(directory.iterdir()):
        if not entry.is_dir():
            continue
        if not entry.name.isdigit() or not entry.name.isascii():
            log.warning(rule["skip_warning"].format(name=entry.name))
            continue
        task_id = int(entry.name)
        if task_id > rule["id_limit"]:
            raise load_failure(sem, "stoi")  # std::out_of_range's what()
        tasks[task_id] = read_task(sem, entry, task_id, dims, model_dtype)  # "007" and "7": the later wins
    return tasks


def peft_tensors(sem: BackendSemantics, task: CachedTask, dims: ModelDims) -> dict[str, np.ndarray]:
    """A task's rows as PEFT's lora_A / lora_B tensors (the scale is in B: alpha 1).  Rows of
    layers the model does not have are skipped, as upstream skips rows outside its layers."""
    known = modules(sem)
    tensors = {}
    for row, (module_id, layer, rank) in zip(task.weights, task.config[:, :3].tolist()):
        if not 0 <= layer < dims.layers:
            continue
        m = known[module_id]
        width_in, width_out = dims.width(m.inp), dims.width(m.out)
        prefix = f"base_model.model.model.layers.{layer}.{m.hf}"
        tensors[f"{prefix}.lora_A.weight"] = np.ascontiguousarray(row[: rank * width_in].reshape(rank, width_in))
        tensors[f"{prefix}.lora_B.weight"] = np.ascontiguousarray(
            row[rank * width_in: rank * (width_in + width_out)].reshape(width_out, rank))
    return tensors


@dataclass
class LoraCache:
    """The prefetched tasks, each written as a PEFT adapter the CPU engine loads."""

    tasks: dict[int, CachedTask] = field(default_factory=dict)
    adapters: list[lora.LoraAdapter] = field(default_factory=list)  # name: the task id; task_id: the engine's key
    workdir: tempfile.TemporaryDirectory | None = None

    def engine_keys(self) -> dict[int, int]:
        """Upstream task id -> the CPU engine's adapter key (1, 2, ...; 0 is its base model)."""
        return {int(a.name): a.task_id for a in self.adapters}

    def close(self) -> None:
        if self.workdir is not None:
            self.workdir.cleanup()
            self.workdir = None


def load_cache(sem: BackendSemantics, prefetch_dir: Path | None, dims: ModelDims) -> LoraCache:
    from safetensors.numpy import save_file

    cache = LoraCache(prefetch(sem, prefetch_dir, dims) if prefetch_dir is not None else {})
    if not cache.tasks:
        return cache
    cache.workdir = tempfile.TemporaryDirectory(prefix="standin-lora-")
    for key, (task_id, task) in enumerate(sorted(cache.tasks.items()), start=1):
        out = Path(cache.workdir.name) / str(task_id)
        out.mkdir()
        save_file(peft_tensors(sem, task, dims), str(out / lora.ADAPTER_WEIGHTS))
        rank = int(task.config[:, 2].max())
        (out / lora.ADAPTER_CONFIG).write_text(json.dumps({"peft_type": "LORA", "r": rank, "lora_alpha": rank}))
        cache.adapters.append(lora.LoraAdapter(str(task_id), key, str(out / lora.ADAPTER_WEIGHTS), 1.0))
    return cache


def for_engine(sem: BackendSemantics, prefetch_dir: Path | None, engine_dir: Path) -> LoraCache:
    """The cache of a model whose CPU engine is `engine_dir` (its config.json gives the widths)."""
    if prefetch_dir is None:
        return LoraCache()
    return load_cache(sem, prefetch_dir, ModelDims.from_config(json.loads((engine_dir / "config.json").read_text())))
