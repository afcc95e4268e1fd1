"""aescl's own helper processes (the host engine's workers, a team's GPU workers, the
OpenCL CPU rounds check, bench's start-up timing): a fresh interpreter that imports aescl
from where this one did, and never from the working directory.

``python -m``/``-c`` put the working directory first on ``sys.path``: in a directory
holding an ``aescl/`` folder, every helper imported that folder instead of aescl, and
ran its code beside a message's keys. Here the helper runs isolated (``-I``: no working
directory, no ``PYTHON*`` variables, no user site) with this process's import path
given explicitly, the folder aescl was imported from first, so that an install reached
only through ``PYTHONPATH`` still works; and its environment (:func:`environment`)
carries none of the secrets the user may keep there.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable
    from multiprocessing.connection import Connection


def import_path() -> list[str]:
    """Where a helper imports from: aescl's own folder's parent, then this process's
    absolute path entries, less the working directory (which is only kept where aescl
    itself was imported from there)."""
    ours = str(Path(__file__).resolve().parent.parent)
    here = os.path.realpath(os.getcwd())
    rest = [entry for entry in sys.path
            if entry and os.path.isabs(entry) and os.path.realpath(entry) != here]
    return list(dict.fromkeys([ours, *rest]))


# Secrets a helper never needs: the CLI's passphrase variable (a worker gets the keys of
# its tasks through its socket, and nothing else).
_SECRET_VARIABLES = ("AESCL_PASSPHRASE",)


def environment(**extra: str) -> dict[str, str]:
    """A helper's environment: this process's, less its secrets, with ``extra``."""
    kept = {name: value for name, value in os.environ.items()
            if name not in _SECRET_VARIABLES}
    return {**kept, **extra}


def command(*, module: str | None = None, code: str | None = None) -> list[str]:
    """The argv start of a helper that runs ``module`` (as ``python -m`` would) or
    ``code`` (as ``python -c`` would); its own arguments follow."""
    if (module is None) == (code is None):
        raise ValueError("a helper runs a module or code, not both")
    boot = f"import sys; sys.path[:0] = {import_path()!r}\n"
    if module is not None:
        boot += f"import runpy; runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    else:
        boot += code  # type: ignore[operator]
    return [sys.executable, "-I", "-c", boot]


def start_helper(module: str) -> tuple[subprocess.Popen[bytes], Connection]:
    """A helper running ``module`` (:func:`command`), and this side of the socket it is
    handed as its first argument: it speaks pickled messages there, and exits when the
    socket closes (:func:`end_helper`, or this process's exit)."""
    import socket  # (here: the helpers' users import this module on small jobs' paths)
    import subprocess
    from multiprocessing.connection import Connection

    ours, theirs = socket.socketpair()
    try:
        process = subprocess.Popen(
            [*command(module=module), str(theirs.fileno())], pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL, env=environment())
    finally:
        theirs.close()
    return process, Connection(ours.detach())


def end_helper(process: subprocess.Popen[bytes], connection: Connection) -> None:
    """Close a helper's socket and wait for it to exit (killed after 5 s)."""
    import subprocess

    connection.close()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def serve_helper(serve: Callable[[Connection], None]) -> None:
    """A helper's main (started by :func:`start_helper`): ``serve`` the socket given as
    its first argument until it closes."""
    import signal
    from multiprocessing.connection import Connection

    # Ctrl-C reaches the whole process group: the caller decides what it ends, and a
    # helper ends when its socket closes (else a traceback a helper, beside the one line).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        serve(Connection(int(sys.argv[1])))
    except (EOFError, OSError):  # the caller went away mid-task: no one left to answer
        pass
