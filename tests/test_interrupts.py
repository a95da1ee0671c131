"""A Ctrl-C held during the command line's start-up is raised at the next safe point."""

from __future__ import annotations

import subprocess
import sys

import pytest

# A Ctrl-C whose handler runs inside a weakref callback, as happens when the signal
# comes while the import system drops a module lock. The script then prints where
# the KeyboardInterrupt reached it.
_SCRIPT = """
import os, signal, sys, weakref
from asyncflow import _interrupts

if sys.argv[1] == "hold":
    _interrupts.hold()

class Lock:
    pass

def dropped(ref):
    os.kill(os.getpid(), signal.SIGINT)
    sum(range(1000))  # the Python handler runs here, between two bytecodes

try:
    lock = Lock()
    ref = weakref.ref(lock, dropped)
    del lock
    print("went on", flush=True)
    _interrupts.check()
    print("not raised", flush=True)
except KeyboardInterrupt:
    print("raised", flush=True)
"""


def _run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _SCRIPT, mode], capture_output=True, text=True, timeout=60)


@pytest.mark.timeout(120)
def test_a_ctrl_c_in_a_weakref_callback_is_lost_without_hold_and_raised_at_check_with_it() -> None:
    plain = _run("plain")  # Python's own handler: the interrupt dies in the callback
    assert plain.stdout.split() == ["went", "on", "not", "raised"], plain
    assert "Exception ignored" in plain.stderr and "KeyboardInterrupt" in plain.stderr
    held = _run("hold")
    assert held.stdout.split() == ["went", "on", "raised"], held
    assert held.stderr == ""


@pytest.mark.timeout(120)
def test_a_second_ctrl_c_is_raised_at_once_and_release_puts_pythons_handler_back() -> None:
    script = """
import os, signal
from asyncflow import _interrupts
_interrupts.hold()
os.kill(os.getpid(), signal.SIGINT)
try:
    os.kill(os.getpid(), signal.SIGINT)
    sum(range(1000))
    print("not raised")
except KeyboardInterrupt:
    print("second raised")
_interrupts.release()  # nothing pending: no raise
print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["second", "raised", "True"], out
