"""The peer comparison of `make bench`: how each peer is launched, and how pairs are reported."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bench.genai_perf import RunResult
from bench.peer import llama_server, vllm_cpu
from bench.peer_compare import Pair, markdown, ours_ratios, prompts, verdicts


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


def test_fast_and_exact_from_the_same_rounds_each_get_their_pairs_and_their_ratio():
    """bench peers with two of ours (the default numerics and exact): one pair per server of ours
    and round, the verdicts name which, and fast/exact comes from the same rounds."""
    fast, exact = "ours (f32 activations, u8 KV cache, dynamic quantization off)", "ours (exact)"
    pairs = [Pair("vllm", 16, r, _run(ours), _run(100), label)
             for r, (a, b) in enumerate([(120, 100), (132, 110)]) for label, ours in ((fast, a), (exact, b))]
    table = "\n".join(markdown(pairs))
    assert f"| {fast} | vllm | c16 | 1.20, 1.32 | **1.26x**" in table
    assert f"| {exact} | vllm | c16 | 1.00, 1.10 | **1.05x**" in table
    said = verdicts(pairs)
    assert said[0].startswith(f"{fast}, c16 vs vllm") and said[1].startswith(f"{exact}, c16 vs vllm")
    assert ours_ratios(pairs) == [f"c16: {exact} / {fast}, output tok/s 0.83x median of 2 rounds (0.83, 0.83)"]
    assert ours_ratios([p for p in pairs if p.ours_label == fast]) == []


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


# llama-bench -o json, one tg test (trimmed to the fields read and a few beside them)
LLAMA_BENCH_JSON = """[
  {
    "build_commit": "0c1e570", "cpu_info": "AMD EPYC", "model_type": "llama 256M Q8_0", "n_threads": 2,
    "n_prompt": 0, "n_gen": 128, "n_depth": 64, "avg_ns": 831724311, "stddev_ns": 16037321,
    "avg_ts": 153.934930, "stddev_ts": 2.939115, "samples_ts": [ 153.935 ]
  }
]
"""


def test_llama_bench_runs_one_generation_test_after_the_prompt_as_context():
    from bench.engine_alone import llama_bench_command, parse_llama_bench

    cmd = llama_bench_command(Path("/b/llama-bench"), Path("/m/x-q8_0.gguf"), 64, 128, threads=2)
    assert cmd[cmd.index("-p") + 1] == "0" and cmd[cmd.index("-n") + 1] == "128" and cmd[cmd.index("-d") + 1] == "64"
    assert cmd[cmd.index("-t") + 1] == "2" and cmd[cmd.index("-o") + 1] == "json" and cmd[cmd.index("-r") + 1] == "1"
    assert parse_llama_bench(LLAMA_BENCH_JSON) == 153.93493
    with pytest.raises(ValueError, match="expected one"):
        parse_llama_bench("[]")


def test_our_engine_is_timed_as_llama_bench_times_its_own_without_the_prompt():
    from bench.engine_alone import decode_tok_s
    from bench.offline import OfflineResult

    # 128 tokens in 1.4 s, the first after 0.13 s: 127 tokens in 1.27 s
    assert decode_tok_s(OfflineResult(1, 1, 128, 1.4, 91.4, 0.13, 0.01)) == 127 / 1.27


def test_the_engines_report_splits_the_served_ratio_into_the_engines_and_the_servers():
    from bench.engine_alone import EnginePair, markdown

    pairs = [EnginePair(0, 100.0, 150.0), EnginePair(1, 96.0, 160.0), EnginePair(2, 99.0, 150.0)]
    text = "\n".join(markdown(pairs, 0.72, Path("/m/x-q8_0.gguf"), 64, 128))
    assert "| 1 | 96.0 | 160.0 | 0.60 |" in text
    assert "ours/llama.cpp **0.66x**" in text  # median of 0.67, 0.60, 0.66
    assert "the servers' share is 1.09x (our serving stack costs relatively less" in text
    assert "(the two serving stacks cost about the same" in "\n".join(markdown(pairs, 0.67, Path("/m/x.gguf"), 64, 128))
    assert "servers' share" not in "\n".join(markdown(pairs, None, Path("/m/x-q8_0.gguf"), 64, 128))


def test_the_report_names_peer_paths_relative_to_the_repository(tmp_path):
    """docs/ keeps these reports: a reader's clone has none of the measuring machine's paths."""
    from bench.peer_compare import shown
    root, elsewhere = tmp_path / "checkout", tmp_path / "shared-build"
    root.mkdir(), elsewhere.mkdir()
    (root / "build").symlink_to(elsewhere)
    command = (f"{elsewhere}/llama.cpp/bin/llama-server", "-m", f"{root}/build/models/x-q8_0.gguf",
               "--port", "8080", "/usr/lib/x.so")
    assert shown(command, root) == "build/llama.cpp/bin/llama-server -m build/models/x-q8_0.gguf --port 8080 /usr/lib/x.so"


def test_a_side_environment_is_installed_once_while_another_process_waits_for_it(tmp_path, monkeypatch):
    """CI makes the tests' side environments in the background (.ci/run): a test that wants one
    meanwhile waits on its lock and then finds it made, instead of installing it a second time."""
    import threading

    from serving import side_environments as environments

    lock = tmp_path / "env.lock"
    lock.write_text("pkg==1\n")
    monkeypatch.setattr(environments, "BUILD", tmp_path / "build")
    commands = []

    def run(cmd, check):
        commands.append(cmd)
        (tmp_path / "build" / "side").mkdir(parents=True, exist_ok=True)
        time.sleep(0.2)  # an install takes a while: the other caller arrives during it

    monkeypatch.setattr(environments.subprocess, "run", run)
    made = []
    callers = [threading.Thread(target=lambda: made.append(environments.ensure_venv("side", lock))) for _ in range(2)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert made == [tmp_path / "build" / "side"] * 2
    assert len(commands) == 3  # one venv, one pip upgrade, one install: not twice
    assert (tmp_path / "build" / "side" / ".lock").read_text() == "pkg==1\n"
