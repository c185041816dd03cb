"""bench/perf_analyzer.py: the gRPC sweeps' input data and command lines (perf_analyzer on its
own, genai-perf no longer in between)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import perf_analyzer as pa
from bench.genai_perf import Endpoint, Load, Target, Workload

TARGET = Target("triton-ensemble", Endpoint.TRITON, "127.0.0.1:8001", "ensemble", (("min_tokens", 64),))
IDS = list(range(1000))


def _decode(ids: list[int]) -> str:
    return " ".join(f"t{i}" for i in ids)


def test_synthetic_inputs_have_the_asked_lengths_and_repeat_with_the_seed():
    fixed = Workload("isl32-osl64", 32, 64)
    entries = pa.synthetic_inputs(IDS, _decode, fixed, 8)
    assert len(entries) == 8 and len({e["text_input"] for e in entries}) == 8
    assert all(len(e["text_input"].split()) == 32 and e["max_tokens"] == 64 for e in entries)
    assert entries == pa.synthetic_inputs(IDS, _decode, fixed, 8)
    assert entries != pa.synthetic_inputs(IDS, _decode, fixed, 8, seed=8)


def test_mixed_lengths_vary_and_stay_positive():
    mixed = Workload("mixed", 64, 32, 16, 8)
    entries = pa.synthetic_inputs(IDS, _decode, mixed, 50)
    inputs = [len(e["text_input"].split()) for e in entries]
    outputs = [e["max_tokens"] for e in entries]
    assert len(set(inputs)) > 5 and len(set(outputs)) > 5
    assert min(inputs) >= 1 and min(outputs) >= 1


def test_input_data_has_genai_perfs_layout():
    """The suite reads the prompts back (bench.suite._texts) as genai-perf wrote them: lists."""
    data = pa.input_data([{"text_input": "hello", "max_tokens": 64}], TARGET.extra_inputs)
    assert data == {"data": [{"text_input": ["hello"], "max_tokens": [64], "min_tokens": [64], "stream": [True]}]}
    assert "stream" not in pa.input_data([{"text_input": "x", "max_tokens": 1}], streaming=False)["data"][0]


@pytest.mark.parametrize("load,mode", [(Load("concurrency", 4), ["--concurrency-range", "4"]),
                                       (Load("request-rate", 2.0), ["--request-rate-range", "2"])])
def test_command(load, mode):
    cmd = pa.command(TARGET, load, Path("in.json"), Path("export.json"), Path("/bin/perf_analyzer"))
    assert cmd[:4] == ["/bin/perf_analyzer", "-m", "ensemble", "--async"]
    text = " ".join(cmd)
    assert "-i grpc --streaming" in text and "-u 127.0.0.1:8001" in text and "--service-kind triton" in text
    assert "--shape max_tokens:1 --shape text_input:1" in text
    assert "--input-data in.json" in text and "--profile-export-file export.json" in text
    assert f"--request-count {load.request_count}" in text
    assert " ".join(mode) in text


def test_only_triton_grpc():
    chat = Target("front", Endpoint.OPENAI_CHAT, "http://x", "m")
    with pytest.raises(ValueError):
        pa.command(chat, Load("concurrency", 1), Path("i"), Path("e"), Path("/bin/perf_analyzer"))


def test_corpus_is_aiperfs(tmp_path):
    assets = tmp_path / "lib" / "python3.11" / "site-packages" / "aiperf" / "dataset" / "generator" / "assets"
    assets.mkdir(parents=True)
    (assets / "shakespeare.txt").write_text("To be")
    assert pa.corpus(tmp_path) == assets / "shakespeare.txt"
    with pytest.raises(RuntimeError):
        pa.corpus(tmp_path / "none")


def test_a_relative_out_dir_still_names_files_perf_analyzer_finds(tmp_path, monkeypatch):
    """perf_analyzer runs in out_dir; make bench's --out is relative (build/bench/report): the
    input and export paths it is given must be absolute (a relative one failed with exit 99)."""
    calls = []

    def call(cmd, cwd, **kwargs):
        calls.append((cmd, cwd))
        return 99

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(pa.subprocess, "call", call)
    monkeypatch.setattr(pa, "write_inputs", lambda out_dir, *a, **k: out_dir / pa.INPUTS)
    monkeypatch.setattr(pa, "perf_analyzer", lambda: Path("/bin/perf_analyzer"))
    with pytest.raises(RuntimeError, match="perf_analyzer failed"):
        pa.run(tmp_path / "venv", TARGET, Workload("w", 8, 6), Load("concurrency", 1), tmp_path, Path("rel/out"),
               None)
    cmd, cwd = calls[0]
    for flag in ("--input-data", "--profile-export-file"):
        path = Path(cmd[cmd.index(flag) + 1])
        assert path.is_absolute() and path.parent == Path(cwd) == tmp_path / "rel" / "out"
