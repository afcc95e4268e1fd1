"""aescl: AES on any OpenCL device, with pycryptodome's calling convention.

    >>> import aescl
    >>> aescl.list_devices()                              # every device
    >>> dev = aescl.get_device("gpu")                     # or "cpu", "nvidia", "0:1", ...
    >>> c = aescl.new(key, aescl.MODE_CTR, nonce=b"", initial_value=iv16, device=dev)
    >>> ciphertext = c.encrypt(data)

Promises of this API:

* The key length picks AES-128, -192 or -256. Output is bit-identical on every
  device and to pycryptodome / OpenSSL for the same parameters.
* ``device`` is a :class:`Device`, a spec string (see :mod:`aescl.devices`) or
  ``None`` (``$AESCL_DEVICE``, else each job's own choice: the device expected
  to finish it soonest, counting a device's start-up in this process and, for
  files, the files' own rate, by what ``aescl bench`` stored, else guesses; a job
  the host engine finishes within OpenCL's start-up never starts OpenCL).
  ``"host"`` is the host engine (OpenSSL on every core, no OpenCL).
  ``"all"`` (every GPU and the host's cores) or a list of devices and specs
  splits each ECB, CTR or chunked job over them
  (:mod:`aescl.scheduler`): the output is the same bytes as on one device, and
  a device that fails mid-job is dropped while the others redo its part. A GCM
  stream runs on the fastest device named.
* ``key_schedule="host"`` expands round keys on the host and uploads them once
  per key; ``"device"`` passes the raw key and each work-group expands it into
  local memory. Both give the same output.
* ECB does no padding: lengths must be a multiple of 16 (``ValueError``).
* CTR counter blocks are ``nonce || counter``, big-endian. ``nonce=None`` picks
  a random 8-byte nonce (read it back from ``.nonce``). A 16-byte
  ``initial_value`` with ``nonce=b""`` counts the whole block, as ``openssl enc
  -iv`` does. Running past the counter field raises :class:`CounterOverflowError`
  before any work starts; encrypting again over keystream this object already
  used (after a ``seek`` back) raises :class:`KeystreamReuseError`. Reusing a
  (key, nonce) pair across objects is the caller's responsibility, as always
  with CTR.
* GCM (``MODE_GCM``) follows pycryptodome: ``update``, ``encrypt``/``decrypt``,
  ``digest``/``verify``, ``encrypt_and_digest``/``decrypt_and_verify``. A
  wrong tag raises :class:`AuthenticationError` (a ``ValueError``), and
  ``decrypt_and_verify`` then releases no plaintext. Any nonce length works;
  ``nonce=None`` picks 16 random bytes, as pycryptodome does.
* :mod:`aescl.chunked` is the authenticated message format (C2SP
  chunked-encryption, AES-256-GCM): ``chunked.encrypt(key, message, context)``
  and ``chunked.decrypt``, streaming ``Writer``/``Reader``, ``decrypt_range``.
  Every message gets a fresh random salt, hence a fresh key and nonce.
* Sets of files, and files split into ranges of whole chunks, are one job in
  :mod:`aescl.filejobs` (outputs appear only when every file succeeded), run in
  this process or on a Dask cluster by :mod:`aescl.distributed` (the ``dask``
  extra; docs/distributed.md).
* Every call is safe from any number of threads, on every device. Calls on one
  OpenCL device take turns (its pipeline and kernels serve one job at a time, and
  one job already keeps it busy); calls on different devices, and host-engine
  calls, run at once. A cipher object itself is one stream: share it between
  threads only with your own lock.
* Host data streams through the device in overlapped pieces (upload, kernels
  and download at once). ``aescl.pinned_empty(n, device)`` allocates
  page-locked memory: input and ``output=`` there skip the host staging copy.
* Launch settings (work-group size, grid, table copies) are tuned per device by
  its engine: a GPU is timed once, on first use (a few seconds), and the choice
  is stored with the kernel cache. ``aescl bench --tune`` tunes again
  (CPUs too); ``$AESCL_TUNE=0`` keeps the defaults. Output never depends on them.
* The kernels are table-based and therefore NOT constant-time: do not run them
  where another tenant can observe cache or shared-memory timing on the device.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import devices
from .devices import Device
from .engines import MODE_GCM
from .engines.registry import get_device, list_devices
from .errors import (
    AesclError,
    AuthenticationError,
    CounterOverflowError,
    DeviceNotFound,
    DeviceUnavailable,
    FormatError,
    KernelBuildError,
    KeySourceError,
    KeystreamReuseError,
    NoPlatformError,
    PaddingError,
    TruncatedError,
    WrongKeyError,
)
from .modes import MODE_CTR, MODE_ECB, CtrCipher, EcbCipher, GcmCipher, new, pinned_empty

__version__ = "0.1.0"

__all__ = [
    "AESGCM",
    "MODE_CTR",
    "MODE_ECB",
    "MODE_GCM",
    "AesclError",
    "AuthenticationError",
    "CounterOverflowError",
    "CtrCipher",
    "Device",
    "DeviceNotFound",
    "DeviceUnavailable",
    "EcbCipher",
    "FormatError",
    "GcmCipher",
    "KernelBuildError",
    "KeySourceError",
    "KeystreamReuseError",
    "NoPlatformError",
    "PaddingError",
    "TruncatedError",
    "WrongKeyError",
    "chunked",
    "fileformat",
    "devices",
    "get_device",
    "list_devices",
    "new",
    "pinned_empty",
]

# Imported on first use (PEP 562), so that `import aescl` stays small. ``chunked`` and
# ``fileformat`` are public (the message and file formats); ``scheduler``, ``teams`` and
# ``chunkformat`` are reachable for the CLI and the tests, but are the house's inner
# rooms, not in ``__all__``: their names may change.
_LAZY = {name: (name, None) for name in ("chunked", "chunkformat", "fileformat", "scheduler",
                                          "teams")}
_LAZY["AESGCM"] = ("aead", "AESGCM")  # (pyca's AESGCM calls: aescl/aead.py)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'aescl' has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    module = importlib.import_module(f".{module_name}", __name__)
    return module if attribute is None else getattr(module, attribute)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
