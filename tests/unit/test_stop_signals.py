import signal
import subprocess
import sys
import threading
import time

import pytest

from serving.stop_signals import STOP_SIGNALS, die_with_parent


def in_child(body: str) -> str:
    """Run `body` in a Python child with StopSignals imported; its printed output.  Signals go
    to a child, never to the test runner: they would meet every native thread the session has
    started (gRPC, OpenVINO, torch), which once crashed pytest."""
    code = "import os, signal\nfrom serving.stop_signals import StopSignals\n" + body
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.parametrize("sig", STOP_SIGNALS)
def test_a_stop_signal_sets_the_event_and_the_shell_status(sig):
    out = in_child(
        f"before = signal.getsignal({int(sig)})\n"
        "with StopSignals() as signals:\n"
        f"    os.kill(os.getpid(), {int(sig)})\n"
        "    print(signals.event.wait(5), int(signals.received), signals.exit_status)\n"
        f"print(signal.getsignal({int(sig)}) == before)\n")
    assert out.split() == ["True", str(int(sig)), str(128 + sig), "True"]


def test_the_first_signal_is_the_one_reported():
    out = in_child(
        "with StopSignals() as signals:\n"
        "    os.kill(os.getpid(), signal.SIGHUP)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    signals.event.wait(5)\n"
        "print(int(signals.received))\n")
    assert out == str(int(signal.SIGHUP))


def test_a_child_of_the_main_thread_dies_with_its_parent():
    # The parent starts `sleep` with die_with_parent, prints its pid and is SIGKILLed.
    code = ("import subprocess, sys; from serving.stop_signals import die_with_parent; "
            "p = subprocess.Popen(die_with_parent(['sleep', '60'])); print(p.pid, flush=True); "
            "import time; time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    child = int(parent.stdout.readline())
    import psutil

    started = time.monotonic()  # setpriv has set the death signal once it runs the command
    while psutil.Process(child).name() != "sleep" and time.monotonic() - started < 5:
        time.sleep(0.01)
    parent.kill()
    parent.wait()
    def dead():  # gone, or a zombie its new parent (pid 1 here) has not reaped yet
        try:
            return psutil.Process(child).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    deadline = time.monotonic() + 5
    while not dead() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert dead()


def test_no_parent_death_signal_from_another_thread():
    result = []
    thread = threading.Thread(target=lambda: result.append(die_with_parent(["sleep", "1"])))
    thread.start()
    thread.join()
    assert result == [["sleep", "1"]] and die_with_parent(["sleep", "1"])[:3] == ["setpriv", "--pdeathsig", "TERM"]
