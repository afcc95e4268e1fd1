"""Ctrl-C as a terminal sends it, to a real program that runs aescl's helper processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def interrupted_stderr(setup: str, loop: str) -> str:
    """Standard error of a real program that runs ``setup``, says it is ready, runs
    ``loop`` again and again, and is sent Ctrl-C (SIGINT to its whole process group, as
    a terminal does) once its worker processes are running."""
    script = ("import os, signal, aescl\n"
              "signal.signal(signal.SIGINT, signal.default_int_handler)\n"  # (as a terminal's)
              f"{setup}\nprint('ready', flush=True)\nwhile True:\n    {loop}\n")
    program = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert program.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        os.killpg(program.pid, signal.SIGINT)
        _, err = program.communicate(timeout=60)
    finally:
        if program.poll() is None:
            os.killpg(program.pid, signal.SIGKILL)
            program.wait()
    assert program.returncode != 0 and "KeyboardInterrupt" in err
    return err

