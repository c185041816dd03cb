"""bench/stress.py is_bls_deadlock: the Python backend's own lock-order deadlock in a BLS stub
(the GIL, response_iterator_map_mu_ and a ResponseIterator's mutex), told from a hang of ours by
the stub's backtraces.  The backtraces are gdb's of tensorrt_llm_bls's stub (Triton 2.51's Python
backend), stuck in `make test` on 2026-11-26 (test_stress, PyTorch-backend layout), the three
threads of the cycle, frames 0-8, argument lists elided."""

from __future__ import annotations

from bench.stress import is_bls_deadlock

STUCK = """Thread 15 (Thread 0x7f94faffd000 (LWP 28445) "triton_python_b"):
#0  __futex_abstimed_wait_common64 (...) at ./nptl/futex-internal.c:57
#1  __futex_abstimed_wait_common (...) at ./nptl/futex-internal.c:87
#2  0x00007f952cea3f7b in __GI___futex_abstimed_wait_cancelable64 (...) at ./nptl/futex-internal.c:139
#3  0x00007f952cea68bc in __pthread_cond_wait_common (...) at ./nptl/pthread_cond_wait.c:503
#4  ___pthread_cond_timedwait64 (...) at ./nptl/pthread_cond_wait.c:643
#5  0x00007f952d265f57 in ?? () from /usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0
#6  0x00007f952d26642e in PyEval_RestoreThread () from /usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0
#7  0x00005600ff2afe5d in triton::backend::python::ResponseIterator::Next() ()
#8  0x00005600ff2a0801 in pybind11::cpp_function::initialize<pybind11::cpp_function::initialize<std::shared_ptr<triton::backend::python::InferResponse

Thread 5 (Thread 0x7f9520dfe000 (LWP 17656) "triton_python_b"):
#0  futex_wait (...) at ../sysdeps/nptl/futex-internal.h:146
#1  __GI___lll_lock_wait (...) at ./nptl/lowlevellock.c:49
#2  0x00007f952ceaa482 in lll_mutex_lock_optimized (...) at ./nptl/pthread_mutex_lock.c:48
#3  ___pthread_mutex_lock (...) at ./nptl/pthread_mutex_lock.c:93
#4  0x00005600ff2b06fa in triton::backend::python::ResponseIterator::EnqueueResponse(std::shared_ptr<triton::backend::python::InferResponse>) ()
#5  0x00005600ff27dfff in triton::backend::python::Stub::ProcessBLSResponseDecoupled(std::unique_ptr<triton::backend::python::IPCMessage, std::default
#6  0x00005600ff27e218 in triton::backend::python::Stub::ParentToStubMQMonitor() ()
#7  0x00007f952ccd44a3 in ?? () from /usr/lib/x86_64-linux-gnu/libstdc++.so.6
#8  0x00007f952cea71f5 in start_thread (...) at ./nptl/pthread_create.c:442

Thread 1 (Thread 0x7f952dac6000 (LWP 17609) "triton_python_b"):
#0  futex_wait (...) at ../sysdeps/nptl/futex-internal.h:146
#1  __GI___lll_lock_wait (...) at ./nptl/lowlevellock.c:49
#2  0x00007f952ceaa482 in lll_mutex_lock_optimized (...) at ./nptl/pthread_mutex_lock.c:48
#3  ___pthread_mutex_lock (...) at ./nptl/pthread_mutex_lock.c:93
#4  0x00005600ff273261 in triton::backend::python::Stub::GetResponseIterator(std::shared_ptr<triton::backend::python::InferResponse>) ()
#5  0x00005600ff28277a in pybind11::cpp_function::initialize<triton::backend::python::pybind11_init_c_python_backend_utils(pybind11::module_&)::{lambd
#6  0x00005600ff25e167 in pybind11::cpp_function::dispatcher(_object*, _object*, _object*) ()
#7  0x00007f952d1c9be3 in ?? () from /usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0
#8  0x00007f952d17be8d in _PyObject_MakeTpCall () from /usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0
"""


def test_the_three_sides_of_the_cycle_are_the_deadlock():
    assert is_bls_deadlock(STUCK)


def test_a_stream_waiting_for_its_response_and_a_new_stream_are_not():
    threads = STUCK.split("\n\n")
    waiting = threads[0].replace("PyEval_RestoreThread", "PyEval_SaveThread")  # waits for a response, not the GIL
    assert not is_bls_deadlock("\n\n".join([waiting, *threads[1:]]))
    for left_out in range(3):
        assert not is_bls_deadlock("\n\n".join(t for i, t in enumerate(threads) if i != left_out))
    assert not is_bls_deadlock("")
