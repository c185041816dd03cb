"""The pipeline tax measured with a light load generator: the served ensemble driven by the
in-process asyncio gRPC client (bench/throughput.py, a few % of a core) against the same engine
driven in-process (bench/offline.py), same prompts and answer lengths, in alternating pairs.

genai-perf + perf_analyzer take ~a fifth of a core on a 2-core host, CPU the compute-bound
engine needs: a served/offline ratio measured with them reads 0.68x where this one reads ~1.0x
on the same host and engine (DESIGN.md section 6).  The suite keeps both and names which
generator produced which figure."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
from dataclasses import dataclass
from typing import cast

from bench.cpu_account import CpuAccount
from bench.offline import OfflineResult, run_offline
from bench.throughput import ThroughputResult, run_closed_loop
from bench.workload import fixed_length_jobs
from contract.model_configs import OpenVinoEngineParameters


@dataclass(frozen=True)
class TaxPair:
    served: ThroughputResult
    offline: OfflineResult
    cpu: CpuAccount | None = None  # where the CPU went during the served run (server processes, the client)

    @property
    def ratio(self) -> float:
        return (
            self.served.output_tokens_per_s / self.offline.output_tokens_per_s
            if self.offline.output_tokens_per_s
            else float("nan")
        )


def measure(
    grpc_url: str,
    params: OpenVinoEngineParameters,
    concurrency: int,
    output_tokens: int,
    rounds: int = 2,
    progress=print,
    server_pid: int | None = None,
) -> list[TaxPair]:
    """`rounds` pairs; each round sends new prompts (no prefix-cache hits), 2 per stream.
    With `server_pid`, each served run's CPU is accounted per server process and for the
    client itself (bench/cpu_account.py)."""
    from transformers import AutoTokenizer, BatchEncoding

    tok = AutoTokenizer.from_pretrained(str(params.engine_dir))
    pairs = []
    for r in range(rounds):
        jobs = fixed_length_jobs(2 * concurrency, output_tokens, seed=500 + r)
        # return_dict=True makes it a BatchEncoding; transformers' annotation does not narrow on it.
        prompts: list[list[int]] = [
            cast(
                BatchEncoding,
                tok.apply_chat_template(
                    [{"role": m.role, "content": m.content} for m in job.messages],
                    add_generation_prompt=True,
                    tokenize=True,
                    return_dict=True,
                ),
            )["input_ids"]
            for job in jobs
        ]
        account = CpuAccount(server_pid, in_process=True) if server_pid else None

        def serve(account: CpuAccount | None = account, jobs: list = jobs) -> ThroughputResult:
            with account if account is not None else contextlib.nullcontext():
                return asyncio.run(run_closed_loop(grpc_url, jobs, concurrency))

        if r % 2 == 0:
            served = serve()
            offline = run_offline(params, prompts, output_tokens, concurrency)
        else:
            offline = run_offline(params, prompts, output_tokens, concurrency)
            served = serve()
        pairs.append(TaxPair(served, offline, account))
        progress(
            f"  pipeline tax c{concurrency} round {r}: served {served.output_tokens_per_s:.1f} tok/s, "
            f"in-process {offline.output_tokens_per_s:.1f} tok/s -> {pairs[-1].ratio:.2f}x"
            + (f"; served run's CPU: {account.summary(8)}" if account is not None else "")
        )
    return pairs


def summary(pairs: list[TaxPair]) -> str:
    ratios = ", ".join(f"{p.ratio:.2f}" for p in pairs)
    c = pairs[0].served.concurrency
    cpu = [p.cpu for p in pairs if p.cpu is not None]
    where = f"; CPU of the last served run: {cpu[-1].summary(8)}" if cpu else ""
    return (
        f"served / offline engine at concurrency {c}, light in-process gRPC client (bench/pipeline_tax.py): "
        f"**{statistics.median(p.ratio for p in pairs):.2f}x** (pairs: {ratios}; "
        f"{', '.join(f'{p.served.output_tokens_per_s:.0f} vs {p.offline.output_tokens_per_s:.0f}' for p in pairs)} "
        "tok/s)"
        f"{where}"
    )
