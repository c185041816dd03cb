"""Upstream's engine limits per TensorRT-LLM version, from the cited tables
contract/upstream/data/gpu_limits_<version>.json: the defaults of trtllm-build (BuildConfig)
and of the LLM API, and trtllm-bench's derivation of max_batch_size and max_num_tokens from
the KV cache (tensorrt_llm/bench/build/tuning.py calc_engine_setting / finetune_setting).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from contract.upstream.citation import (
    DATA_DIR,
    Citation,
    Table,
    UpstreamTableError,
    load_table,
    table_names,
)

TABLE_PREFIX = "gpu_limits_"
# Our limit -> the table row that gives upstream's default (or deduction) for it, and trtllm-bench's.
ROWS = {
    "max_batch_size": "build.max_batch_size",
    "max_num_tokens": "build.max_num_tokens",
    "max_seq_len": "build.max_seq_len",
    "max_input_len": "build.max_input_len",
    "llm.max_batch_size": "llmapi.max_batch_size",
    "llm.max_num_tokens": "llmapi.max_num_tokens",
    "llm.max_seq_len": "llmapi.max_seq_len",
    "trtllm_bench": "bench.tuning",
    "trtllm_bench.no_workload": "bench.defaults_without_workload",
}


def _step_up(value: float, steps: list[list], floor: int = 0) -> int:
    """`value` rounded up to the step of the first band whose bound it is under (None: no bound)."""
    for bound, step in steps:
        if bound is None or value < bound:
            return max(floor, step * math.ceil(value / step))
    raise UpstreamTableError(f"no band for {value} in {steps}")


@dataclass(frozen=True)
class BenchTuning:
    """trtllm-bench's finetune_setting, its constants read from the table (row bench.tuning)."""

    kv_cache_fraction: float  # of (total GPU memory - engine size); the plan uses the serving fraction instead
    max_requests: int  # the raw batch is capped here ("decoder buffer size")
    max_tokens: int  # the raw token count is capped here ("TRT activation buffer")
    min_batch: int
    min_tokens: int  # "to ensure Ctx/Gen overlap efficiency"
    batch_steps: list
    token_steps: list

    def tune(self, requests: float, isl: int, osl: int, pp_size: int) -> tuple[int, int]:
        """(max_batch_size, max_num_tokens) for `requests` sequences of isl + osl tokens in the KV cache."""
        raw_batch = min(requests, self.max_requests) / pp_size
        raw_tokens = min(raw_batch * (1 + isl / osl), self.max_tokens)
        first_bound = self.batch_steps[0][0]
        batch = (
            _step_up(raw_batch, self.batch_steps[:1], self.min_batch)
            if raw_batch < first_bound
            else _step_up(raw_batch, self.batch_steps[1:])
        )
        first_bound = self.token_steps[0][0]
        tokens = (
            _step_up(raw_tokens, self.token_steps[:1], self.min_tokens)
            if raw_tokens < first_bound
            else _step_up(raw_tokens, self.token_steps[1:])
        )
        return batch, tokens


@dataclass(frozen=True)
class UpstreamLimits:
    table: Table

    @property
    def version(self) -> str:
        return self.table.upstream_version

    def row(self, name: str) -> dict:
        row_id = ROWS[name]
        return next(r for r in self.table.rows if r.get("id") == row_id)

    @property
    def max_batch_size(self) -> int:
        return int(self.row("max_batch_size")["value"])

    @property
    def max_num_tokens(self) -> int:
        return int(self.row("max_num_tokens")["value"])

    @property
    def seq_len_deduction(self) -> dict:
        return self.row("max_seq_len")["deduction"]

    @property
    def bench(self) -> BenchTuning:
        p = self.row("trtllm_bench")["params"]
        return BenchTuning(
            p["kv_cache_gpu_mem_fraction"],
            p["max_requests"],
            p["max_tokens"],
            p["min_batch"],
            p["min_tokens"],
            p["batch_steps"],
            p["token_steps"],
        )

    def citation(self, name: str) -> Citation:
        return self.table.citation(self.row(name))

    @property
    def file(self) -> Path:
        return (DATA_DIR / f"{self.table.name}.json").relative_to(DATA_DIR.parents[2])


def limit_versions() -> list[str]:
    return sorted(name[len(TABLE_PREFIX) :] for name in table_names() if name.startswith(TABLE_PREFIX))


def upstream_limits(version: str) -> UpstreamLimits:
    if version not in limit_versions():
        raise UpstreamTableError(f"no engine-limit table for TensorRT-LLM {version!r}; tables: {limit_versions()}")
    limits = UpstreamLimits(load_table(TABLE_PREFIX + version))
    for name in ROWS:  # every row the sizing reads is present and cited
        limits.citation(name)
    return limits
