"""aescl/engines/host/reach.py: another process's ordinary memory read and written
(process_vm_readv/writev), as the host engine's worker processes do with the caller's.
Here the process is this one and a child of it, which Linux allows where the kernel lets
a process trace its children's parent (no Yama ptrace_scope of 1 or more)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from aescl.engines.host import reach


def test_bytes_are_read_and_written_at_an_address_of_a_process():
    source = np.frombuffer(os.urandom(3 << 20), np.uint8)  # (more than one call may move)
    copy = bytearray(len(source))
    reach.read(os.getpid(), reach.address_of(memoryview(source)), memoryview(copy))
    assert copy == source.tobytes()
    target = np.zeros(100, np.uint8)
    reach.write(os.getpid(), reach.address_of(memoryview(target)) + 10, memoryview(b"xyz"))
    assert target[10:13].tobytes() == b"xyz" and not target[:10].any()
    assert not target[13:].any()


def test_a_read_only_buffer_has_an_address_and_an_empty_one_none():
    data = b"read only"
    assert reach.address_of(memoryview(data)) != 0
    assert reach.address_of(memoryview(b"")) == 0


def test_an_address_that_is_not_mapped_is_one_clear_error():
    with pytest.raises(OSError, match=f"process {os.getpid()}'s memory"):
        reach.read(os.getpid(), 8, memoryview(bytearray(16)))


def test_a_child_reads_its_parents_memory_where_the_kernel_allows():
    secret = np.frombuffer(os.urandom(64), np.uint8)
    code = ("import os, sys; from aescl.engines.host import reach; seen = bytearray(64); "
            "reach.read(os.getppid(), int(sys.argv[1]), memoryview(seen)); "
            "sys.stdout.write(seen.hex())")
    child = subprocess.run([sys.executable, "-c", code,
                            str(reach.address_of(memoryview(secret)))],
                           capture_output=True, text=True)
    if child.returncode != 0 and "Operation not permitted" in child.stderr:
        pytest.skip("this kernel lets no child read its parent's memory (Yama ptrace_scope)")
    assert child.returncode == 0, child.stderr
    assert child.stdout == secret.tobytes().hex()
