"""aescl/teams.py: the specs ``cuda`` and ``cuda:N`` (the CUDA engine, on CUDA device
arrays), and what they refuse. No GPU is needed: host data never reaches the CUDA
engine. CUDA arrays under these specs: tests/test_engine_cuda.py; pyopencl arrays:
tests/test_engine_opencl_arrays.py."""

from __future__ import annotations

import pytest

import aescl
from aescl import teams


@pytest.mark.parametrize(("spec", "ordinal"), [("cuda", None), ("CUDA", None), ("cuda:0", 0),
                                               (" cuda:3 ", 3)])
def test_a_cuda_spec_names_the_cuda_engine_and_its_gpu(spec, ordinal):
    assert teams.cuda_spec(spec) == (True, ordinal)
    team = teams.team(spec)
    assert isinstance(team, teams.CudaTeam) and team.ordinal == ordinal


@pytest.mark.parametrize("spec", ["cudax", "cuda:", "cuda:a", "host", None, ["cuda"]])
def test_other_specs_are_not_cuda_specs(spec):
    assert teams.cuda_spec(spec) == (False, None)


def _host_calls(device: str) -> dict[str, object]:
    key, data = bytes(16), bytes(100)
    return {
        "ecb": lambda: aescl.new(key, aescl.MODE_ECB, device=device).encrypt(bytes(32)),
        "ctr": lambda: aescl.new(key, aescl.MODE_CTR, nonce=bytes(8),
                                 device=device).encrypt(data),
        "ctr-partial": lambda: aescl.new(key, aescl.MODE_CTR, nonce=bytes(8),
                                         device=device).encrypt(bytes(5)),
        "gcm": lambda: aescl.new(key, aescl.MODE_GCM, nonce=bytes(12),
                                 device=device).encrypt_and_digest(data),
        "chunked": lambda: aescl.chunked.encrypt(bytes(32), data, device=device),
    }


@pytest.mark.parametrize("call", list(_host_calls("cuda")))
def test_host_data_on_a_cuda_spec_is_refused_in_one_clear_line(call):
    with pytest.raises(aescl.DeviceNotFound, match="'cuda:1' is the CUDA engine") as caught:
        _host_calls("cuda:1")[call]()
    assert "\n" not in str(caught.value)


def test_a_cuda_spec_does_not_join_a_list_of_devices():
    with pytest.raises(aescl.DeviceNotFound, match="nor a place in a list"):
        teams.resolve_devices(["host", "cuda"])
