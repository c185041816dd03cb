"""The peer comparison of `make bench`: how each peer is launched, and how pairs are reported."""

from __future__ import annotations

import os
from pathlib import Path

from bench.genai_perf import RunResult
from bench.peer import llama_server, vllm_cpu
from bench.peer_compare import Pair, markdown, prompts, verdicts


def _run(tok_s: float, ttft: float = 0.1) -> RunResult:
    q = {"p50": ttft, "p90": ttft, "p99": ttft}
    return RunResult("x", "osl128", "c1", 4, 1.0, int(tok_s), tok_s, 4.0, 4.0, 1.0, q, {"p50": 0.01, "p99": 0.02}, q)


def test_llama_server_gets_parallel_slots_sharing_one_context_and_fixed_length_answers():
    launch = llama_server(Path("/b/llama-server"), Path("/m/SmolLM2-135M-Instruct-q8_0.gguf"), 8123, slots=16,
                          context_per_slot=2048, threads=2)
    cmd = list(launch.command)
    assert cmd[cmd.index("-np") + 1] == "16" and "-cb" in cmd
    assert cmd[cmd.index("-c") + 1] == str(16 * 2048)  # the context is split between the slots
    assert cmd[cmd.index("-t") + 1] == "2"
    assert launch.name == "llama.cpp-server-Q8_0"
    assert launch.extra_body == {"ignore_eos": True}
    assert launch.url == "http://127.0.0.1:8123"


def test_vllm_cpu_runs_as_a_module_with_its_threads_bound_and_tcmalloc_when_found(tmp_path):
    launch = vllm_cpu(tmp_path / "venv", tmp_path, 9000, dtype="bfloat16", kv_cache_gb=3,
                      tcmalloc=Path("/usr/lib/libtcmalloc_minimal.so.4"))
    assert launch.command[1:3] == ("-m", "vllm.entrypoints.openai.api_server")  # not the console script
    assert launch.env["VLLM_CPU_KVCACHE_SPACE"] == "3"
    assert launch.env["VLLM_CPU_OMP_THREADS_BIND"]
    assert launch.env["LD_PRELOAD"].endswith("libtcmalloc_minimal.so.4")
    without = vllm_cpu(tmp_path / "venv", tmp_path, 9000, dtype="bfloat16")
    assert "LD_PRELOAD" not in without.env and without.name.endswith("-no-tcmalloc")  # said in the report


def test_every_run_gets_prompts_no_other_run_sent():
    a, b = prompts(16, 1), prompts(16, 2)
    assert len(set(a)) == 16 and not set(a) & set(b)


def test_the_report_gives_every_pair_and_says_who_wins():
    pairs = [Pair("llama.cpp-server-Q8_0", 1, 0, _run(60), _run(100)), Pair("llama.cpp-server-Q8_0", 1, 1, _run(66), _run(100)),
             Pair("llama.cpp-server-Q8_0", 16, 0, _run(400), _run(200)), Pair("llama.cpp-server-Q8_0", 16, 1, _run(380), _run(200))]
    table = "\n".join(markdown(pairs))
    assert "0.60, 0.66" in table and "**0.63x**" in table
    assert "2.00, 1.90" in table and "**1.95x**" in table
    said = verdicts(pairs)
    assert said[0].startswith("c1 vs llama.cpp-server-Q8_0") and said[0].endswith("llama.cpp-server-Q8_0 is faster")
    assert said[1].endswith("we are faster")
    mixed = verdicts([Pair("p", 1, 0, _run(90), _run(100)), Pair("p", 1, 1, _run(110), _run(100))])
    assert mixed[0].endswith("no clear winner (pairs disagree)")


def test_a_paused_peer_is_stopped_whole_and_resumed(tmp_path):
    import subprocess
    import sys
    import time

    from bench.peer import PeerLaunch, PeerServer

    # a spinning parent with a spinning child, as vLLM's API server and its engine processes
    code = "import os, time\nif os.fork() == 0:\n    while True: pass\nwhile True: pass\n"
    server = PeerServer(PeerLaunch("spinner", (sys.executable, "-c", code), "m", 0), tmp_path / "log")
    server.process = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        def states():
            time.sleep(0.3)
            pids = [p for p in os.listdir("/proc") if p.isdigit() and _pgid(p) == server.process.pid]
            return sorted(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] for p in pids)

        assert states() == ["R", "R"]
        with server.paused():
            assert states() == ["T", "T"]  # both processes stopped
        assert states() == ["R", "R"]
    finally:
        server.__exit__()


def _pgid(pid: str) -> int:
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return -1
