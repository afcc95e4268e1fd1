"""pycryptodome's own tests of AES, CTR and GCM, run against aescl (aescl/modes.py is a
drop-in for ``Crypto.Cipher.AES.new``): in a pytest subprocess per target, with
``AES.new`` routed to ``aescl.new`` (tests/pycryptodome_routing.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import selected_devices

# pycryptodome's tests that read its private attributes (``cipher._threads``,
# ``cipher._signer._threads``): not part of the API aescl reproduces.
PRIVATE = "not test_threads_all_cores"


def _targets() -> list[str]:
    opencl = selected_devices()
    return ["host", *([opencl[0].id, "all"] if opencl else [])]


@pytest.mark.slow
@pytest.mark.parametrize("target", _targets())
def test_pycryptodomes_own_aes_ctr_and_gcm_tests_pass(tmp_path, target):
    try:
        from Crypto.SelfTest.Cipher import test_CTR
    except ImportError:
        pytest.skip("this pycryptodome ships no SelfTest package")
    if not hasattr(test_CTR, "TestCtrThreads"):
        pytest.skip("this pycryptodome's SelfTest is not the pytest suite of 4.4 and later")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "pycryptodome_routing", "-p",
         "no:cacheprovider", "-k", PRIVATE, "--pyargs", "Crypto.SelfTest.Cipher.test_AES",
         "Crypto.SelfTest.Cipher.test_CTR", "Crypto.SelfTest.Cipher.test_GCM"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env={**os.environ, "AESCL_ROUTED_DEVICE": target,
             "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent),
                                                          os.environ.get("PYTHONPATH")]))})
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) > 1500, summary  # the whole suite ran
