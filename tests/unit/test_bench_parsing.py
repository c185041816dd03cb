"""What the benchmark reads from genai-perf/perf_analyzer exports."""

import json
import time

import pytest

from bench.genai_perf import Endpoint, Load, Slo, Target, Workload, command, parse_export
from serving.prometheus import parse, value

S = 1_000_000_000  # ns


def triton_request(t0, ttft_s, gap_s, words):
    stamps = [t0 + int(ttft_s * S) + int(i * gap_s * S) for i in range(len(words))]
    outputs = [{"text_output": w, "num_output_tokens": i + 1} for i, w in enumerate(words)]
    return {"timestamp": t0, "request_inputs": {}, "response_timestamps": stamps + [stamps[-1] + 1000],
            "response_outputs": outputs + [{"text_output": ""}]}


def sse(text):
    return {"response": "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}) + "\n\n"}


def test_triton_export(default_checkpoint):
    words = [" the", " cat", " sat", " on", " the", " mat"]
    fast = triton_request(1 * S, 0.1, 0.02, words)
    slow = triton_request(2 * S, 2.0, 0.02, words)  # misses the TTFT SLO
    outside = triton_request(50 * S, 0.1, 0.02, words)  # after the measurement window
    export = {"experiments": [{"experiment": {"mode": "concurrency", "value": 2}, "requests": [fast, slow, outside],
                               "window_boundaries": [0, 10 * S]}]}
    target = Target("t", Endpoint.TRITON, "x", "ensemble")
    r = parse_export(export, target, Workload("w", 8, 6), Load("concurrency", 2), default_checkpoint, Slo(1.0, 0.05))
    assert r.requests == 2 and r.output_tokens == 12 and r.seconds == 10.0
    assert r.output_tokens_per_s == 1.2 and r.goodput_rps == 0.1 and r.slo_met_fraction == 0.5
    assert abs(r.ttft_s["p50"] - 1.05) < 1e-3 and abs(r.itl_s["p50"] - 0.02) < 1e-3
    assert r.ttfts_s == [0.1, 2.0]


def test_openai_sse_export_skips_the_role_chunk(default_checkpoint):
    t0 = 1 * S
    role = {"response": 'data: {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}\n\n'}
    request = {"timestamp": t0, "response_timestamps": [t0 + S // 100, t0 + S // 2, t0 + S // 2 + S // 10],
               "response_outputs": [role, sse("Hello"), sse(" world")]}
    export = {"experiments": [{"experiment": {}, "requests": [request], "window_boundaries": [0, 2 * S]}]}
    r = parse_export(export, Target("p", Endpoint.OPENAI_CHAT, "x", "m"), Workload("w", 8, 2), Load("concurrency", 1),
                     default_checkpoint, Slo(1.0, 1.0))
    assert abs(r.ttft_s["p50"] - 0.5) < 1e-6  # the first chunk with text, not the role-only one


def test_command_for_the_ensemble(default_checkpoint, tmp_path):
    cmd = command(tmp_path, Target("t", Endpoint.TRITON, "127.0.0.1:8001", "ensemble", (("min_tokens", 128),)),
                  Workload("w", 128, 128), Load("request-rate", 2.5), default_checkpoint, tmp_path / "out")
    text = " ".join(cmd)
    for part in ("--endpoint-type kserve", "--backend tensorrtllm", "--streaming", "--request-rate 2.5",
                 "--extra-inputs min_tokens:128", "--synthetic-input-tokens-mean 128", "--request-count 20"):
        assert part in text


def test_prometheus_text():
    samples = parse('# HELP x\nllm_requests_running{model="a"} 3\nllm_requests_finished_total{model="a",outcome="cancelled"} 2\n'
                    'llm_requests_finished_total{model="a",outcome="finished"} 5\nnv_up 1\n')
    assert value(samples, "llm_requests_running") == 3
    assert value(samples, "llm_requests_finished_total") == 7
    assert value(samples, "llm_requests_finished_total", outcome="cancelled") == 2


def test_the_peer_runs_bf16_only_where_the_cpu_computes_it():
    from bench.peer import native_dtype

    assert native_dtype("processor\t: 0\nflags\t\t: fpu avx2 fma\n") == "float32"
    assert native_dtype("flags\t\t: fpu avx512f avx512_bf16\n") == "bfloat16"
    assert native_dtype("flags\t\t: fpu amx_bf16 amx_tile\n") == "bfloat16"


def test_cpu_account_names_the_server_processes_and_the_load_generator():
    import subprocess
    import sys

    from bench.cpu_account import LOAD_GENERATOR, CpuAccount

    server = subprocess.Popen([sys.executable, "-c", "import time; t = time.process_time()\nwhile time.process_time() - t < 0.3: pass\ntime.sleep(5)"])
    try:
        with CpuAccount(server.pid) as account:
            subprocess.run([sys.executable, "-c", "import time; t = time.process_time()\nwhile time.process_time() - t < 0.3: pass"])
            time.sleep(0.5)
    finally:
        server.kill()
        server.wait()
    # Shares are of wall time, which a busy host stretches: that each side is seen and named is the point.
    assert account.shares[LOAD_GENERATOR] > 0 and max(v for k, v in account.shares.items() if k != LOAD_GENERATOR) > 0
    assert LOAD_GENERATOR in account.summary()


def test_cpu_account_counts_an_in_process_load_generator():
    """bench/pipeline_tax.py's client runs in this process: with in_process its CPU is this
    process's own, and a child's is not counted."""
    import os
    import subprocess
    import sys

    from bench.cpu_account import LOAD_GENERATOR, CpuAccount

    with CpuAccount(os.getpid(), in_process=True) as account:
        t = time.process_time()
        while time.process_time() - t < 0.5:
            pass
        subprocess.run([sys.executable, "-c", "import time; t = time.process_time()\nwhile time.process_time() - t < 1.5: pass"])
    # os.times counts whole clock ticks (10 ms), process_time does not: a tick of slack below
    assert 0.48 <= account.shares[LOAD_GENERATOR] * account.wall_s / 100 < 1.5


def test_genai_perf_runs_again_only_after_a_cut_short_export(tmp_path, monkeypatch):
    """perf_analyzer 2.51 sometimes stops writing its export at a 64 KiB boundary: that failure,
    and no other, gets another run (bench.genai_perf.run)."""
    from bench import genai_perf

    calls = []

    def once(*args):
        out_dir = args[5]
        calls.append(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        if len(calls) == 1:
            (out_dir / "profile_export.json").write_text('{"experiments": [' + " " * 100)  # cut short
            raise RuntimeError("genai-perf failed (1)")
        return "result"

    monkeypatch.setattr(genai_perf, "_run_once", once)
    with pytest.warns(UserWarning, match="cut-short profile export"):
        assert genai_perf.run(tmp_path, None, None, None, tmp_path, tmp_path / "run", None) == "result"
    assert len(calls) == 2

    def broken(*args):
        args[5].mkdir(parents=True, exist_ok=True)
        raise RuntimeError("genai-perf failed (2)")  # no export at all: not the perf_analyzer bug

    monkeypatch.setattr(genai_perf, "_run_once", broken)
    with pytest.raises(RuntimeError, match="failed \\(2\\)"):
        genai_perf.run(tmp_path, None, None, None, tmp_path, tmp_path / "other", None)


@pytest.mark.parametrize("has_filter", [True, False])
def test_archives_are_extracted_only_inside_their_directory(tmp_path, monkeypatch, has_filter):
    """bench/peer_builds.extract_safely (the llama.cpp sdist): with or without tarfile's data
    filter (Python 3.11.2 has none), a member outside the directory is refused."""
    import io
    import tarfile

    from bench.peer_builds import extract_safely

    if not has_filter:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)

    def archive(name: str) -> tarfile.TarFile:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"ok"))
        buffer.seek(0)
        return tarfile.open(fileobj=buffer)

    extract_safely(archive("pkg/file.txt"), tmp_path / "out")
    assert (tmp_path / "out" / "pkg" / "file.txt").read_text() == "ok"
    with pytest.raises(Exception):
        extract_safely(archive("../escaped.txt"), tmp_path / "out")
    assert not (tmp_path / "escaped.txt").exists()
