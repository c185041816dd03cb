"""bench/stress.py ServerWatch: after a load, a Python-backend stub that died is reported (a
stub's SIGSEGV leaves no line in tritonserver's log, and its requests are never answered)."""

from __future__ import annotations

import os

import bench.stress as stress
from bench.stress import ServerWatch
from serving.stubs import StubCommand


def stub(model: str) -> StubCommand:
    return StubCommand(model=model, shm_region="triton_python_backend_shm_region_x", parent_pid=os.getpid())


def test_a_stub_that_died_is_a_problem_and_live_ones_are_not(tmp_path, monkeypatch):
    log = tmp_path / "server.log"
    log.write_text("I1126 started\n")
    monkeypatch.setattr(stress, "stubs_of", lambda pid: {101: stub("preprocessing_0_0"), 102: stub("tensorrt_llm_bls_0_0")})
    watch = ServerWatch.of(os.getpid(), log)
    assert watch.stubs == {101: "preprocessing_0_0", 102: "tensorrt_llm_bls_0_0"}
    assert watch.problems() == []
    monkeypatch.setattr(stress, "stubs_of", lambda pid: {101: stub("preprocessing_0_0")})
    assert watch.problems() == ["the Python-backend stub of tensorrt_llm_bls_0_0 (pid 102) died"]
