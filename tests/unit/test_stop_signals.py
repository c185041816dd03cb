import os
import signal
import subprocess
import sys
import threading

import pytest

from serving.stop_signals import STOP_SIGNALS, StopSignals, die_with_parent


@pytest.mark.parametrize("sig", STOP_SIGNALS)
def test_a_stop_signal_sets_the_event_and_the_shell_status(sig):
    before = signal.getsignal(sig)
    with StopSignals() as signals:
        os.kill(os.getpid(), sig)
        assert signals.event.wait(5)
        assert signals.received == sig and signals.exit_status == 128 + sig
    assert signal.getsignal(sig) == before


def test_the_first_signal_is_the_one_reported():
    with StopSignals() as signals:
        os.kill(os.getpid(), signal.SIGHUP)
        os.kill(os.getpid(), signal.SIGTERM)
        signals.event.wait(5)
    assert signals.received == signal.SIGHUP


def test_a_child_of_the_main_thread_dies_with_its_parent():
    # The parent starts `sleep` with die_with_parent, prints its pid and is SIGKILLed.
    code = ("import subprocess, sys; from serving.stop_signals import die_with_parent; "
            "p = subprocess.Popen(['sleep', '60'], preexec_fn=die_with_parent()); print(p.pid, flush=True); "
            "import time; time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    import psutil

    try:
        psutil.Process(child).wait(5)
    except psutil.NoSuchProcess:
        pass
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_no_parent_death_signal_from_another_thread():
    result = []
    thread = threading.Thread(target=lambda: result.append(die_with_parent()))
    thread.start()
    thread.join()
    assert result == [None] and die_with_parent() is not None
