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
from tests.unit.trtllm_fixtures import info_of, llama_8b_checkpoint, trtllm_spec, write_default_tokenizer

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
    from build_engines.pytorch_build import build_pytorch_engine

    spec = make_spec(default_checkpoint, "tensorrt_llm_pytorch", None, 8, 512, 1024, 256, 128, 0, False, 0,
                     triton_image="26.07", tp_size=3, gpu="H100-SXM", detect=lambda: None)
    engine = tmp_path / "engine"
    build_pytorch_engine(spec, engine)
    render_repository(engine, tmp_path / "repo")
    assert engine_dir_of(tmp_path / "repo") == engine.resolve()
    assert world_size(BuildRecord.read(engine)) == 1
    assert launch_command(GpuServerSettings(repository=tmp_path / "repo"), 1)[0] == "/opt/tritonserver/bin/tritonserver"
    with pytest.raises(BuildRecordError, match="tensorrt_llm: engine built with 1.2.1, server has not installed"):
        prepare(GpuServerSettings(repository=tmp_path / "repo"))
