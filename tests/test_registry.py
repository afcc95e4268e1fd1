"""The engine registry (aescl/engines/registry.py): every engine is one line, and a new
engine is its package and one more line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import aescl
from aescl.devices import host_device
from aescl.engines import registry


def test_every_device_listed_comes_from_its_engines_line():
    listed = aescl.list_devices()
    assert listed == [d for line in registry.ENGINES for d in line.devices()]
    assert {d.engine for d in listed} <= {line.name for line in registry.ENGINES}
    assert listed[-1] == host_device()


def test_a_devices_engine_is_its_packages_engine_class():
    engine = registry.engine_for(host_device())
    assert type(engine) is registry.line_of("host").package().Engine
    assert registry.engine_for(host_device()) is engine  # (made once)
    with pytest.raises(LookupError, match="no engine named 'hip'"):
        registry.line_of("hip")


def test_an_engines_own_spec_starts_no_other_engine(tmp_path):
    program = ("import json, aescl; from aescl.engines import registry\n"
               "try:\n    aescl.get_device('cuda:7')\nexcept aescl.DeviceNotFound as e:\n"
               "    said = str(e)\nprint(json.dumps([said, registry.started()['opencl']]))")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    said, opencl_started = json.loads(done.stdout)
    assert "cuda:7" in said and not opencl_started


# A toy engine for a device API aescl has never heard of: its package (put where
# aescl.engines.<name> is looked up) runs the host engine's code for a device of its
# own kind, and its line is the only other change.
_TOY = '''
import dataclasses, json, os, sys, types
import numpy as np
from Crypto.Cipher import AES
import aescl
from aescl.devices import host_device
from aescl.engines import registry
from aescl.engines.host import HostEngine

TOY = dataclasses.replace(host_device(), id="toy:0", name="Toy GPU", vendor="other",
                          type="gpu", engine="toy")
found = types.ModuleType("toy_found")
found.find = lambda: [TOY]
found.started = lambda: True
sys.modules["toy_found"] = found
package = types.ModuleType("aescl.engines.toy")
package.Engine = HostEngine
pinned = []
def host_memory(nbytes, chosen, shared):
    pinned.append([d.id for d in chosen])
    return np.zeros(nbytes, np.uint8)
package.host_memory = host_memory
sys.modules["aescl.engines.toy"] = package

registry.ENGINES = (*registry.ENGINES, registry.EngineLine(
    "toy", "toy_found:find", "toy_found:started", called="toy GPU",
    missing_hint="no toy here"))

key, nonce, data = os.urandom(32), os.urandom(8), os.urandom(3 << 20)
sealed = aescl.new(key, aescl.MODE_CTR, nonce=nonce, device="toy:0").encrypt(data)
try:
    aescl.get_device("toy:1")
except aescl.DeviceNotFound as error:
    missing = str(error)
memory = aescl.pinned_empty(64, "toy:0")
from aescl import teams
print(json.dumps({
    "listed": [d.id for d in aescl.list_devices()][-2:],
    "named": aescl.get_device("toy").id,
    "engine": type(registry.engine_for(TOY)).__name__,
    "right": sealed == AES.new(key, AES.MODE_CTR, nonce=nonce).encrypt(data),
    "missing": missing,
    "pinned": pinned, "memory": len(memory),
    "in all": "toy:0" in [d.id for d in teams.resolve_devices("all")],
}))
'''


def test_a_new_engine_is_its_package_and_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-c", _TOY], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {
        "listed": ["host", "toy:0"], "named": "toy:0", "engine": "HostEngine", "right": True,
        "missing": "no device matches 'toy:1'; available: toy:0 Toy GPU (other gpu)",
        "pinned": [["toy:0"]], "memory": 64, "in all": True,
    }
