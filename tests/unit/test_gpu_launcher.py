"""The multi-GPU launcher: world size from build.json, per-rank flags, signal forwarding and
exit status (with a fake child process standing in for mpirun)."""

import datetime
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from build_engines.repository import render_repository
from contract.build_record import BuildRecord, BuildRecordError
from serving.gpu_launcher import GpuServerSettings, LaunchError, engine_dir_of, launch_command, prepare, world_size
from tests.unit.trtllm_fixtures import LLAMA_8B, info_of, llama_8b_checkpoint, trtllm_spec, write_default_tokenizer

ROOT = Path(__file__).resolve().parents[2]


def _engine(root: Path, tp: int, pp: int, versions: dict) -> Path:
    ckpt = llama_8b_checkpoint(root / "ckpt")
    engine = root / "engine"
    engine.mkdir()
    BuildRecord(backend="tensorrt_llm", spec=trtllm_spec(ckpt, tp_size=tp, pp_size=pp).to_dict(),
                checkpoint=info_of(ckpt).to_dict(), versions=versions, built_at=datetime.datetime.now().isoformat(),
                build_seconds=1.0).write(engine)
    write_default_tokenizer(engine / "tokenizer")
    return engine


def test_world_size_comes_from_build_json(tmp_path):
    engine = _engine(tmp_path, tp=2, pp=2, versions={})
    render_repository(engine, tmp_path / "repo")
    assert engine_dir_of(tmp_path / "repo") == engine.resolve()
    assert world_size(BuildRecord.read(engine)) == 4


def test_mpirun_command_for_tp2():
    s = GpuServerSettings(repository=Path("/repo"), grpc_port=9001)
    cmd = launch_command(s, 2)
    assert cmd[:2] == ["mpirun", "--allow-run-as-root"]
    ranks = " ".join(cmd[2:]).split(" : ")
    assert len(ranks) == 2 and all(r.startswith("-n 1 /opt/tritonserver/bin/tritonserver --model-repository=/repo")
                                   for r in ranks)
    rank0, rank1 = ranks[0].split(), ranks[1].split()
    assert "--backend-config=python,shm-region-prefix-name=prefix0_" in rank0
    assert "--backend-config=python,shm-region-prefix-name=prefix1_" in rank1
    assert "--grpc-port=9001" in rank0 and "--model-control-mode=none" in rank0
    assert {"--model-control-mode=explicit", "--load-model=tensorrt_llm", "--allow-http=false", "--allow-grpc=false",
            "--allow-metrics=false"} <= set(rank1)
    assert not any(a.startswith("--grpc-port") for a in rank1)


def test_single_gpu_runs_tritonserver_without_mpirun():
    cmd = launch_command(GpuServerSettings(repository=Path("/repo")), 1)
    assert cmd[0] == "/opt/tritonserver/bin/tritonserver" and ":" not in cmd


def test_refuses_an_engine_built_by_other_versions(tmp_path):
    engine = _engine(tmp_path, tp=1, pp=1, versions={"tensorrt_llm": "1.0.0", "tensorrt": "10.11.0.33"})
    render_repository(engine, tmp_path / "repo")
    with pytest.raises(BuildRecordError, match="tensorrt_llm: engine built with 1.0.0, server has"):
        prepare(GpuServerSettings(repository=tmp_path / "repo"))


def test_cpu_repository_is_refused(tmp_path):
    with pytest.raises(LaunchError, match="no tensorrt_llm/config.pbtxt"):
        engine_dir_of(tmp_path)


FAKE_CHILD = textwrap.dedent("""
    import signal, sys, time
    from pathlib import Path
    out = Path(sys.argv[1])
    def on_signal(signum, frame):
        out.write_text(f"got {signum}")
        sys.exit(7)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    out.write_text("ready")
    if sys.argv[2] == "exit3":
        sys.exit(3)
    if sys.argv[2] == "suicide":
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        import os; os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(60)
""")


def _launcher(tmp_path, mode: str) -> tuple[subprocess.Popen, Path]:
    child = tmp_path / "child.py"
    child.write_text(FAKE_CHILD)
    marker = tmp_path / "marker"
    code = (f"import sys; from serving.gpu_launcher import supervise; "
            f"sys.exit(supervise([sys.executable, {str(child)!r}, {str(marker)!r}, {mode!r}]))")
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT), marker


def _wait_for(marker: Path, text: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if marker.is_file() and marker.read_text().startswith(text):
            return
        time.sleep(0.05)
    pytest.fail(f"{marker} never said {text!r}")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_are_forwarded_and_the_child_status_returned(tmp_path, sig):
    launcher, marker = _launcher(tmp_path, "wait")
    _wait_for(marker, "ready")
    launcher.send_signal(sig)
    assert launcher.wait(20) == 7
    assert marker.read_text() == f"got {int(sig)}"


def test_child_exit_status_is_the_launcher_status(tmp_path):
    launcher, _ = _launcher(tmp_path, "exit3")
    assert launcher.wait(20) == 3


def test_child_killed_by_a_signal_exits_128_plus_signal(tmp_path):
    launcher, _ = _launcher(tmp_path, "suicide")
    assert launcher.wait(20) == 128 + signal.SIGTERM


def test_a_pytorch_backend_repository_runs_one_tritonserver(tmp_path, default_checkpoint):
    """The LLM starts its TP x PP GPU workers itself (NVIDIA's llmapi workflow): no mpirun."""
    from build_engines.cli_options import make_spec
    from build_engines.pytorch.build import build_pytorch_engine

    spec = make_spec(default_checkpoint, backend="tensorrt_llm_pytorch", max_batch_size=8, max_input_len=512,
                     max_seq_len=1024, max_num_tokens=256, default_max_tokens=128, prefix_caching=False,
                     triton_image="26.07", tp_size=3, gpu="H100-SXM", detect=lambda: None)
    engine = tmp_path / "engine"
    build_pytorch_engine(spec, engine)
    render_repository(engine, tmp_path / "repo")
    assert engine_dir_of(tmp_path / "repo") == engine.resolve()
    assert world_size(BuildRecord.read(engine)) == 1
    assert launch_command(GpuServerSettings(repository=tmp_path / "repo"), 1)[0] == "/opt/tritonserver/bin/tritonserver"
    with pytest.raises(BuildRecordError, match="tensorrt_llm: engine built with 1.2.1, server has not installed"):
        prepare(GpuServerSettings(repository=tmp_path / "repo"))


# Issue 33 item 4: draft-target decoding with TP x PP > 1.  The draft engine is built with the
# target's TP and world size, so a leader-mode launch whose ranks > 0 load only tensorrt_llm
# leaves tensorrt_llm_draft's other ranks missing and its rank 0 waits for them forever.
# Upstream's answer (NVIDIA/TensorRT-LLM examples/draft_target_model/README.md "Triton
# Inference Server workflow": "`--multi-model` is necessary if TP mode is used", world size 1;
# triton_backend/scripts/launch_triton_server.py --multi-model: TRTLLM_ORCHESTRATOR=1 and the
# memory-pool flags) is orchestrator mode: one tritonserver that spawns each model's workers.

def _draft_engine(root: Path, tp: int, pp: int = 1) -> Path:
    from build_engines.trtllm.options import DraftTargetOptions
    from build_engines.trtllm.options import SpeculativeDecoding

    ckpt = llama_8b_checkpoint(root / "ckpt")
    draft = llama_8b_checkpoint(root / "draft", {**LLAMA_8B, "num_hidden_layers": 2})
    spec = trtllm_spec(ckpt, tp_size=tp, pp_size=pp, speculative_decoding=SpeculativeDecoding.DRAFT_TOKENS_EXTERNAL,
                       draft_target=DraftTargetOptions(str(draft), 4))
    engine = root / "engine"
    engine.mkdir()
    BuildRecord(backend="tensorrt_llm", spec=spec.to_dict(), checkpoint=info_of(ckpt).to_dict(), versions={},
                built_at=datetime.datetime.now().isoformat(), build_seconds=1.0).write(engine)
    write_default_tokenizer(engine / "tokenizer")
    return engine


def _env_exports(cmd: list[str]) -> dict[str, str]:
    return dict(cmd[i + 1].split("=", 1) for i, a in enumerate(cmd) if a == "-x")


def test_draft_target_with_tp2_runs_in_orchestrator_mode(tmp_path):
    engine = _draft_engine(tmp_path, tp=2)
    render_repository(engine, tmp_path / "repo")
    cmd = launch_command(GpuServerSettings(repository=tmp_path / "repo", visible_gpus=4), 2)
    # one MPI process (the orchestrator), which spawns both engines' two workers itself
    assert cmd[:2] == ["mpirun", "--allow-run-as-root"] and cmd.count("-n") == 1 and ":" not in cmd
    assert cmd[cmd.index("-n") + 1] == "1"
    assert _env_exports(cmd) == {"TRTLLM_ORCHESTRATOR": "1", "TRTLLM_ORCHESTRATOR_SPAWN_PROCESSES": "1"}
    assert {"--pinned-memory-pool-byte-size=0", "--enable-peer-access=false"} <= set(cmd)
    assert [a for a in cmd if a.startswith("--cuda-memory-pool-byte-size=")] == [
        f"--cuda-memory-pool-byte-size={gpu}:0" for gpu in range(4)]
    assert "--model-control-mode=none" in cmd and not any(a.startswith("--load-model") for a in cmd)


def test_every_rank_of_a_leader_mode_launch_loads_every_tensorrt_llm_model(tmp_path):
    """Whatever the mode: no TensorRT-LLM model of the repository may lack its other ranks."""
    engine = _draft_engine(tmp_path, tp=2)
    render_repository(engine, tmp_path / "repo")
    cmd = launch_command(GpuServerSettings(repository=tmp_path / "repo"), world_size(BuildRecord.read(engine)))
    ranks = " ".join(cmd).split(" : ")
    if len(ranks) > 1:  # leader mode: ranks > 0 must load the draft too
        for rank in ranks[1:]:
            assert "--load-model=tensorrt_llm_draft" in rank.split(), rank
    else:
        assert _env_exports(cmd).get("TRTLLM_ORCHESTRATOR") == "1", cmd


def test_draft_target_on_one_gpu_and_tp2_without_a_draft_keep_their_launch(tmp_path):
    one = _draft_engine(tmp_path / "one", tp=1)
    render_repository(one, tmp_path / "one" / "repo")
    cmd = launch_command(GpuServerSettings(repository=tmp_path / "one" / "repo", visible_gpus=1), 1)
    assert cmd[0] == "/opt/tritonserver/bin/tritonserver" and "-x" not in cmd
    plain = _engine(tmp_path / "plain", tp=2, pp=1, versions={})
    render_repository(plain, tmp_path / "plain" / "repo")
    cmd = launch_command(GpuServerSettings(repository=tmp_path / "plain" / "repo", visible_gpus=2), 2)
    assert cmd.count("-n") == 2 and "-x" not in cmd and "--load-model=tensorrt_llm" in cmd


def test_the_orchestrator_turns_off_the_pools_of_the_gpus_it_sees():
    from serving.gpu_launcher import visible_gpu_count

    s = GpuServerSettings(repository=Path("/repo"))
    assert visible_gpu_count(s, 2, {"CUDA_VISIBLE_DEVICES": "2,3,5"}) == 3
    assert visible_gpu_count(s, 2, {}, detect=lambda: None) == 2  # no nvidia-smi: the engine's world size
    assert visible_gpu_count(GpuServerSettings(repository=Path("/repo"), visible_gpus=8), 2, {}) == 8


def test_a_wedged_server_is_stopped_and_the_launcher_exits_for_a_restart(tmp_path):
    """gpu-up's canary (serving/canary.py CanaryWatch) saying an entry is wedged: the server gets
    SIGTERM, and the launcher exits WEDGED_EXIT for the container's restart policy."""
    from serving.gpu_launcher import WEDGED_EXIT

    child = tmp_path / "child.py"
    child.write_text(FAKE_CHILD)
    marker = tmp_path / "marker"
    code = (f"import sys, pathlib; from serving.gpu_launcher import supervise; m = pathlib.Path({str(marker)!r}); "
            f"sys.exit(supervise([sys.executable, {str(child)!r}, str(m), 'wait'], "
            f"wedged=lambda: 'wedged: tensorrt_llm_bls gave no answer' if m.is_file() else None))")
    launcher = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    assert launcher.wait(30) == WEDGED_EXIT
    assert marker.read_text() == f"got {int(signal.SIGTERM)}"
    assert "wedged: tensorrt_llm_bls gave no answer: stopping tritonserver" in launcher.stderr.read()


def test_the_canary_watch_waits_for_readiness_and_names_the_wedged_entry():
    from serving.canary import CanaryResult, CanarySettings, CanaryWatch

    class Scripted:
        settings = CanarySettings(period_s=0.01, failures_to_wedge=2)

        def probe(self):
            return [CanaryResult("ensemble", True, 0.1, "answered"),
                    CanaryResult("tensorrt_llm_bls", False, 4.0, "no answer within 4s")]

    ready = []
    watch = CanaryWatch(Scripted(), ready=lambda: bool(ready), report=lambda message: None)
    watch.start()
    time.sleep(0.2)
    assert watch.wedged() is None  # not ready yet: no canary
    ready.append(True)
    deadline = time.monotonic() + 5
    while watch.wedged() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    watch.stop()
    assert watch.wedged() == "wedged: tensorrt_llm_bls gave no answer (no answer within 4s)"
