"""bench/stress.py crash_frame: the function a "Signal (11)" backtrace of tritonserver points at,
resolved with the binary's symbol table, so that Triton 2.51's own gRPC-frontend race is told
apart from a crash of ours.  The backtrace is the one tritonserver 2.51 printed in a `make test`
run on 2026-11-26 (test_stress, PyTorch-backend layout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.stress import FRONTEND_RACE_FRAME, crash_frame

BINARY = Path(__file__).resolve().parents[2] / "build" / "tritonserver" / "bin" / "tritonserver"
CRASH = """I1126 02:41:15.173150 18193 bls_calls.py:279] "tensorrt_llm_bls: a9608a63 cancelled after 3.87s"
Signal (11) received.
 0# 0x000055BF6881752D in /work/ci-check4/build/tritonserver/bin/tritonserver
 1# 0x00007FF7FF65A050 in /usr/lib/x86_64-linux-gnu/libc.so.6
 2# 0x000055BF6888697E in /work/ci-check4/build/tritonserver/bin/tritonserver
 3# 0x000055BF6887188B in /work/ci-check4/build/tritonserver/bin/tritonserver
 4# 0x00007FF7FF4D44A3 in /usr/lib/x86_64-linux-gnu/libstdc++.so.6
 5# 0x00007FF7FF6A71F5 in /usr/lib/x86_64-linux-gnu/libc.so.6
 6# 0x00007FF7FF7278EC in /usr/lib/x86_64-linux-gnu/libc.so.6
"""

pytestmark = pytest.mark.skipif(not BINARY.is_file(), reason="needs the installed tritonserver (build/tritonserver)")


def test_the_frontend_race_is_found_in_the_backtrace():
    assert crash_frame(CRASH, BINARY).startswith(FRONTEND_RACE_FRAME)


def test_other_crashes_and_no_crash_are_not_it():
    assert crash_frame("Signal (15) received.\n", BINARY) == ""
    elsewhere = CRASH.replace("0x000055BF6888697E", "0x000055BF6881752D")  # the signal handler itself
    assert not crash_frame(elsewhere, BINARY).startswith(FRONTEND_RACE_FRAME)
    assert crash_frame(CRASH, Path("/nonexistent/tritonserver")) == ""
