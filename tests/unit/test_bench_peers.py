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


# /proc/cpuinfo's model name and flags lines of three hosts (trimmed of the other fields)
EPYC_AVX2 = """model name\t: AMD EPYC 7B12
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl nonstop_tsc cpuid extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext ssbd ibrs ibpb stibp vmmcall fsgsbase tsc_adjust bmi1 avx2 smep bmi2 rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 clzero xsaveerptr arat npt nrip_save umip rdpid
"""
ZEN4 = """model name\t: AMD EPYC 9R14 96-Core Processor
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl nonstop_tsc cpuid extd_apicid aperfmperf tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a misalignsse 3dnowprefetch topoext perfctr_core invpcid_single ssbd perfmon_v2 ibrs ibpb stibp ibrs_enhanced vmmcall fsgsbase bmi1 avx2 smep bmi2 invpcid avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx512_bf16 clzero xsaveerptr rdpru wbnoinvd arat avx512vbmi pku ospke avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq rdpid flush_l1d
"""
SAPPHIRE_RAPIDS = """model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc arch_perfmon rep_good nopl xtopology nonstop_tsc cpuid aperfmperf tsc_known_freq pni pclmulqdq monitor ssse3 fma cx16 pdcm pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm abm 3dnowprefetch cpuid_fault invpcid_single ssbd ibrs ibpb stibp ibrs_enhanced fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx_vnni avx512_bf16 wbnoinvd ida arat avx512vbmi umip pku ospke waitpkg avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg tme avx512_vpopcntdq rdpid cldemote movdiri movdir64b md_clear serialize amx_bf16 avx512_fp16 amx_tile amx_int8 flush_l1d arch_capabilities
"""
BASE = ["GGML_SSE42", "GGML_AVX", "GGML_AVX2", "GGML_BMI2", "GGML_FMA", "GGML_F16C"]
AVX512 = ["GGML_AVX512", "GGML_AVX512_VBMI", "GGML_AVX512_VNNI", "GGML_AVX512_BF16"]


@pytest.mark.parametrize("cpuinfo, enabled", [
    (EPYC_AVX2, BASE),
    (ZEN4, BASE + AVX512),  # no AVX-VNNI (VEX) on Zen 4
    (SAPPHIRE_RAPIDS, BASE + ["GGML_AVX_VNNI"] + AVX512),  # AMX in cpuinfo, off in the build
], ids=["epyc-avx2", "zen4", "sapphire-rapids"])
def test_the_explicit_llama_cpp_build_turns_on_exactly_the_cpus_features_and_never_amx(cpuinfo, enabled):
    from bench.llama_cpp_build import LlamaBuild, cpu_flags

    build = LlamaBuild.explicit(cpu_flags(cpuinfo))
    assert build.enabled() == enabled
    flags = build.cmake_definitions()
    assert flags[0] == "-DGGML_NATIVE=OFF"
    assert {"-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"} <= set(flags)
    # every feature option is set, off where the CPU lacks it (GGML_NATIVE=OFF turns AVX2 and the like on by default)
    assert len(flags) == 1 + 11 + 3 and all(f"-D{name}=ON" in flags for name in enabled)
    assert build.directory != LlamaBuild.native().directory


# llama-server as the fakes below run it: answers the OpenAI API on --port, or dies with SIGILL at start
FAKE_SERVER = """
import json, os, resource, signal, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
if {die}:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.kill(os.getpid(), signal.SIGILL)
class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass
    def answer(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        self.answer({{"data": [{{"id": "m"}}]}})
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.answer({{"choices": [{{"text": " Paris", "message": {{"content": "hi"}}}}]}})
HTTPServer(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1])), Handler).serve_forever()
"""


@pytest.fixture
def fake_llama_cpp(tmp_path, monkeypatch):
    """bench/peer_builds with its commands faked (no sdist, no compiler): cmake's configure records
    its options, its build writes a llama-server that dies with SIGILL where GGML_NATIVE is on (the
    AMX Xeon's) and one that serves elsewhere.  Returns the commands run."""
    import sys

    from bench import peer_builds

    monkeypatch.setattr(peer_builds, "LLAMA_CPP_DIR", tmp_path / "llama.cpp")
    monkeypatch.setattr(peer_builds, "ensure_gguf", lambda llama, python, checkpoint: tmp_path / "m-q8_0.gguf")
    tree = peer_builds.llama_cpp(peer_builds.LlamaBuild.native()).source.parent.parent
    tree.mkdir(parents=True)
    (tree / ".unpacked").write_text("sha\n")
    commands, configured = [], {}

    def run(cmd, log, **kwargs):
        commands.append(cmd)
        if "--target" in cmd and "pip" in cmd[2:3]:
            Path(cmd[cmd.index("--target") + 1]).mkdir(parents=True, exist_ok=True)
        elif "-B" in cmd:
            configured[cmd[cmd.index("-B") + 1]] = cmd
        elif "--build" in cmd:
            build_dir = Path(cmd[cmd.index("--build") + 1])
            native = "-DGGML_NATIVE=ON" in configured[str(build_dir)]
            (build_dir / "bin").mkdir(parents=True, exist_ok=True)
            for name in ("llama-server", "llama-bench"):
                (build_dir / "bin" / name).write_text(f"#!{sys.executable}\n" + FAKE_SERVER.format(die=native))
                (build_dir / "bin" / name).chmod(0o755)

    monkeypatch.setattr(peer_builds, "_run", run)
    return commands


def _configures(commands):
    return [cmd for cmd in commands if "-B" in cmd]


def test_a_native_llama_server_killed_by_sigill_on_its_probe_is_rebuilt_with_explicit_flags(tmp_path, fake_llama_cpp):
    import json

    from bench.llama_cpp_build import BuildKind
    from bench.peer_builds import ensure_served_llama_cpp

    served = ensure_served_llama_cpp(Path("/usr/bin/python3"), tmp_path / "ckpt", cpuinfo=SAPPHIRE_RAPIDS)
    assert served.choice.build.kind is BuildKind.EXPLICIT
    assert "the native build failed its probe on Intel(R) Xeon(R) Platinum 8488C" in served.choice.why
    assert served.choice.why.endswith("(this run): llama.cpp-server-Q8_0 was killed by SIGILL (illegal instruction)")
    native_cmd, explicit_cmd = _configures(fake_llama_cpp)
    assert "-DGGML_NATIVE=ON" in native_cmd
    assert {"-DGGML_NATIVE=OFF", "-DGGML_AVX512_BF16=ON", "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF"} <= set(explicit_cmd)
    # two directories: the native build is still there beside the explicit one, each with its probe's outcome
    native_dir, explicit_dir = Path(native_cmd[native_cmd.index("-B") + 1]), served.llama.build_dir
    assert native_dir != explicit_dir and (native_dir / "bin" / "llama-server").is_file()
    assert served.llama.server == explicit_dir / "bin" / "llama-server" and served.llama.bench.parent == explicit_dir / "bin"
    native_record = json.loads((native_dir / "probe.json").read_text())
    assert native_record["ok"] is False and "SIGILL" in native_record["reason"]
    assert json.loads((explicit_dir / "probe.json").read_text())["ok"] is True


def test_a_native_build_that_failed_its_probe_is_not_tried_again_on_that_cpu(tmp_path, fake_llama_cpp):
    from bench import peer_builds
    from bench.llama_cpp_build import BuildKind

    python, checkpoint = Path("/usr/bin/python3"), tmp_path / "ckpt"
    peer_builds.ensure_served_llama_cpp(python, checkpoint, cpuinfo=SAPPHIRE_RAPIDS)
    fake_llama_cpp.clear()
    probed = []

    def probe(llama, gguf, log):
        probed.append(llama.build_dir)
        return peer_builds.probe_server(llama, gguf, log)

    again = peer_builds.ensure_served_llama_cpp(python, checkpoint, cpuinfo=SAPPHIRE_RAPIDS, probe=probe)
    assert again.choice.build.kind is BuildKind.EXPLICIT and "(recorded by an earlier run)" in again.choice.why
    assert probed == [] and fake_llama_cpp == []  # neither built nor probed: the records say it all
    # another CPU (build/ shared by hosts): the native build is probed there, and it runs there
    other = peer_builds.ensure_served_llama_cpp(python, checkpoint, cpuinfo=ZEN4, probe=lambda llama, gguf, log: None)
    assert other.choice.build.kind is BuildKind.NATIVE and other.choice.why.startswith("its server answered")


def test_where_no_build_serves_both_reasons_are_given(tmp_path, fake_llama_cpp):
    from bench.peer_builds import ensure_served_llama_cpp

    with pytest.raises(RuntimeError, match="native: killed.*explicit flags.*: refused"):
        ensure_served_llama_cpp(Path("/usr/bin/python3"), tmp_path / "ckpt", cpuinfo=ZEN4,
                                probe=lambda llama, gguf, log: "killed" if llama.build_dir.name == "build" else "refused")


def test_the_report_names_the_llama_cpp_build_that_ran_and_why():
    from bench.llama_cpp_build import BuildChoice, LlamaBuild, cpu_flags
    from bench.peer_compare import build_lines, json_rows

    why = "the native build failed its probe on Intel(R) Xeon(R) Platinum 8488C (this run): killed by SIGILL"
    choice = BuildChoice(LlamaBuild.explicit(cpu_flags(SAPPHIRE_RAPIDS)), why)
    launch = llama_server(Path("/b/llama-server"), Path("/m/x-q8_0.gguf"), 8123, threads=2, build=choice)
    assert build_lines([launch, vllm_cpu(Path("/v"), Path("/c"), 9000, dtype="float32")]) == [
        "- llama.cpp-server-Q8_0: llama.cpp build: explicit flags (GGML_NATIVE=OFF; on: GGML_SSE42, GGML_AVX, "
        "GGML_AVX2, GGML_BMI2, GGML_FMA, GGML_F16C, GGML_AVX_VNNI, GGML_AVX512, GGML_AVX512_VBMI, GGML_AVX512_VNNI, "
        "GGML_AVX512_BF16; off: GGML_AMX_TILE, GGML_AMX_INT8, GGML_AMX_BF16): " + why
    ]
    rows = json_rows([Pair(launch.name, 1, 0, _run(60), _run(100)), Pair("vllm-cpu-float32", 1, 0, _run(60), _run(100))],
                     [launch])
    assert rows[0]["peer_build"]["kind"] == "explicit" and rows[0]["peer_build"]["why"] == why
    assert rows[0]["peer_build"]["options"]["GGML_AMX_INT8"] is False and rows[1]["peer_build"] is None
    native = BuildChoice(LlamaBuild.native(), "its server answered a 4-token completion on AMD EPYC")
    assert native.describe() == "llama.cpp build: native (-DGGML_NATIVE=ON): its server answered a 4-token completion on AMD EPYC"
