"""bench/stress.py crash_frame: the function a "Signal (11)" backtrace of tritonserver points at
(for a "Signal (6)", the first one past gRPC's assertion path), resolved with the binary's
symbol table, so that Triton 2.51's own gRPC-frontend race is told apart from a crash of ours.
The backtraces are ones tritonserver 2.51 printed in `make test` runs on 2026-11-26 (test_stress,
PyTorch-backend layout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.stress import FRONTEND_RACE_FRAME, crash_frame
from serving.triton_install import prepare_install, server_dir

BINARY = server_dir(Path(__file__).resolve().parents[2] / "build") / "bin" / "tritonserver"
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
# The same race ending in gRPC's assertion (GRPC_CALL_ERROR_TOO_MANY_OPERATIONS), another load base.
ABORT = """E1126 18:28:05.375262578   26390 call_op_set.h:975]                    API misuse of type GRPC_CALL_ERROR_TOO_MANY_OPERATIONS observed
E1126 18:28:05.375321175   26390 call_op_set.h:977]                    ASSERTION FAILED: false
Signal (6) received.
 0# 0x00005558D0FED52D in /work/ci-check/build/tritonserver/bin/tritonserver
 1# 0x00007F3AC3E5A050 in /usr/lib/x86_64-linux-gnu/libc.so.6
 2# 0x00007F3AC3EA8EEC in /usr/lib/x86_64-linux-gnu/libc.so.6
 3# gsignal in /usr/lib/x86_64-linux-gnu/libc.so.6
 4# abort in /usr/lib/x86_64-linux-gnu/libc.so.6
 5# 0x00005558D0F8189E in /work/ci-check/build/tritonserver/bin/tritonserver
 6# 0x00005558D163C4AE in /work/ci-check/build/tritonserver/bin/tritonserver
 7# 0x00005558D10601F9 in /work/ci-check/build/tritonserver/bin/tritonserver
 8# 0x00005558D105D68F in /work/ci-check/build/tritonserver/bin/tritonserver
 9# 0x00005558D104788B in /work/ci-check/build/tritonserver/bin/tritonserver
10# 0x00007F3AC3CD44A3 in /usr/lib/x86_64-linux-gnu/libstdc++.so.6
"""



@pytest.fixture(scope="module", autouse=True)
def installed_server():
    """The addresses resolve against the installed tritonserver: install it (the unit tests run
    before any integration fixture has)."""
    prepare_install(BINARY.parents[1])


def test_the_frontend_race_is_found_in_the_backtrace():
    assert crash_frame(CRASH, BINARY).startswith(FRONTEND_RACE_FRAME)


def test_the_race_ending_in_grpc_s_assertion_is_found_past_it():
    assert crash_frame(ABORT, BINARY).startswith(FRONTEND_RACE_FRAME)
    # an abort whose first frame past gRPC's crash path is elsewhere (here: the signal handler's) is not it
    elsewhere = ABORT.replace("0x00005558D10601F9", "0x00005558D0FED52D").replace("0x00005558D105D68F", "0x00005558D0FED52D")
    assert not crash_frame(elsewhere, BINARY).startswith(FRONTEND_RACE_FRAME)


def test_other_crashes_and_no_crash_are_not_it():
    assert crash_frame("Signal (15) received.\n", BINARY) == ""
    elsewhere = CRASH.replace("0x000055BF6888697E", "0x000055BF6881752D")  # the signal handler itself
    assert not crash_frame(elsewhere, BINARY).startswith(FRONTEND_RACE_FRAME)
    assert crash_frame(CRASH, Path("/nonexistent/tritonserver")) == ""
