"""Throughput of every mode and key size on OpenCL devices and on the host (``aescl bench``).

Each (device, mode, key size, input size) gets four figures, in GB/s
(10^9 bytes of input per second):

* **kernel**: the kernel launches alone, timed by OpenCL event profiling, on
  data already in device memory (in place, except the chunked format's one-pass
  sealing on CPU devices, which writes the sealed layout into a second buffer);
* **resident**: wall clock from enqueue to completion on data already in device
  memory, input and output in separate buffers: what a caller whose data lives
  on the device waits for, launch and synchronisation included;
* **host->host**: one library call on a host array (``aescl.new(...).encrypt``,
  ``chunked.encrypt_raw``), both transfers and the host's own copies included;
* **pinned->pinned**: the same call with input and output in page-locked memory
  from ``aescl.pinned_empty``, which the DMA engines reach without staging
  copies. Set it beside the pinned transfer rates of the same run. For the host
  engine and the split, that memory is also shared with the host engine's worker
  processes, which then do its part apart from the interpreter.

Host baselines (pycryptodome, and OpenSSL through ``cryptography`` when it is
installed) run the same work on one CPU thread and have only the host->host
figure. Their output is the reference every device's output is compared with,
so a fast but wrong kernel shows up as a mismatch, not as a record.

Modes: ``ctr``, ``ecb-encrypt``, ``ecb-decrypt`` and ``gcm-chunked`` (the
chunked format's payload, AES-256-GCM in 16 KiB chunks: CTR, GHASH and tags;
AES-256 only, as the format defines). Input is random: table lookups on uniform
data are served by broadcasts and would look faster than real data.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import __version__, chunked, rates, teams
from .benchreport import (  # noqa: F401  (re-exported: bench.Settings, bench.table, ...)
    DEFAULT_SIZES,
    DEVICE_MEASURES,
    KEY_BITS,
    MEASURE_LABELS,
    MEASURES,
    MODES,
    QUICK,
    QUICK_SIZES,
    GiB,
    KiB,
    MiB,
    Report,
    Result,
    Settings,
    Target,
    format_size,
    parse_size,
    save_plot,
    table,
)
from .devices import Device
from .engines import engine_for
from .engines.registry import get_device
from .modes import MODE_CTR, MODE_ECB, new, pinned_empty
from .teams import DevicesSpec
from .timing import gb_s, repeat, wall

_TRANSFER_LIMIT = 256 * MiB

Progress = Callable[[str], None]

# ---- timing ----------------------------------------------------------------------------

def _version_of(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


# ---- host baselines --------------------------------------------------------------------

HostRun = Callable[[np.ndarray, np.ndarray], None]  # (input, output) -> None

# Output buffers get room for one block more than the output: OpenSSL's update_into
# insists on it, and without it the OpenSSL baseline would pay for a copy.
_SLACK = 15


@dataclass
class _Job:
    """One (mode, key) configuration: its key material and the expected output size."""

    mode: str
    key: bytes
    iv: bytes  # CTR's initial counter block, or the chunked format's base nonce (12 bytes)

    def output_bytes(self, size: int) -> int:
        return chunked.sealed_size(size, raw=True) if self.mode == "gcm-chunked" else size


def _chunks(job: _Job, data: np.ndarray) -> Iterable[tuple[bytes, np.ndarray, int]]:
    """(nonce, plaintext, output offset) of each chunk, the short final one included."""
    full = data.nbytes // chunked.CHUNK_SIZE
    for index in range(full + 1):
        piece = data[index * chunked.CHUNK_SIZE:][: chunked.CHUNK_SIZE]
        yield (chunked.chunk_nonce(job.iv, index), piece,
               chunked.chunk_offset(index, raw=True))


def _pycryptodome_run(job: _Job) -> HostRun:
    from Crypto.Cipher import AES

    def run(data: np.ndarray, out: np.ndarray) -> None:
        # pycryptodome takes memoryviews, not numpy arrays; neither copies.
        source, target = memoryview(data), memoryview(out)[: job.output_bytes(data.nbytes)]
        if job.mode == "ctr":
            AES.new(job.key, AES.MODE_CTR, nonce=b"", initial_value=job.iv).encrypt(
                source, target)
        elif job.mode == "ecb-encrypt":
            AES.new(job.key, AES.MODE_ECB).encrypt(source, target)
        elif job.mode == "ecb-decrypt":
            AES.new(job.key, AES.MODE_ECB).decrypt(source, target)
        else:
            for nonce, piece, offset in _chunks(job, data):
                cipher = AES.new(job.key, AES.MODE_GCM, nonce=nonce)
                cipher.encrypt(memoryview(piece), target[offset:][: piece.nbytes])
                out[offset + piece.nbytes:][: chunked.TAG_SIZE] = np.frombuffer(
                    cipher.digest(), np.uint8)
    return run


def _openssl_run(job: _Job) -> HostRun:
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    def run(data: np.ndarray, out: np.ndarray) -> None:
        if job.mode == "gcm-chunked":
            aead = AESGCM(job.key)
            for nonce, piece, offset in _chunks(job, data):
                sealed = aead.encrypt(nonce, piece.tobytes(), None)
                out[offset:][: len(sealed)] = np.frombuffer(sealed, np.uint8)
            return
        mode = modes.CTR(job.iv) if job.mode == "ctr" else modes.ECB()
        cipher = Cipher(algorithms.AES(job.key), mode)
        context = cipher.decryptor() if job.mode == "ecb-decrypt" else cipher.encryptor()
        context.update_into(data, out)
    return run


def _time_host(host_run: HostRun, data: np.ndarray, out: np.ndarray, min_seconds: float
               ) -> float:
    return repeat(lambda: wall(lambda: host_run(data, out)), min_seconds)


def host_baselines() -> list[tuple[Target, Callable[[_Job], HostRun]]]:
    """The baselines that are installed: pycryptodome, and OpenSSL through ``cryptography``."""
    found = []
    try:
        import Crypto

        found.append((Target("pycryptodome", f"pycryptodome {Crypto.__version__} (1 thread)",
                             "pycryptodome", "host"), _pycryptodome_run))
    except ImportError:
        pass
    try:
        from cryptography.hazmat.backends.openssl import backend

        found.append((Target("openssl", f"{backend.openssl_version_text()} via cryptography "
                             "(1 thread)", "openssl", "host"), _openssl_run))
    except ImportError:
        pass
    return found


# ---- devices ---------------------------------------------------------------------------

def device_limit(device: Device) -> int:
    """The largest input a device is benched with: two buffers of it fit comfortably,
    and the host keeps room for input, output and the reference."""
    host_memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(device.max_alloc_bytes, device.global_mem_bytes // 4, host_memory // 8)


def library_call(job: _Job, device: DevicesSpec, data: Any, out: np.ndarray | None
                 ) -> bytes | None:
    """One library call of the job on ``device`` (a device, or a list: a split job), into
    ``out``; or with ``out`` None, the plain call: its new bytes result."""
    if job.mode == "gcm-chunked":
        return chunked.encrypt_raw(job.key, job.iv, data, device=device, output=out)
    if job.mode == "ctr":
        return new(job.key, MODE_CTR, nonce=b"", initial_value=job.iv, device=device).encrypt(
            data, output=out)
    cipher = new(job.key, MODE_ECB, device=device)
    return (cipher.decrypt if job.mode == "ecb-decrypt" else cipher.encrypt)(data, output=out)


def _plain_calls(job: _Job, device: DevicesSpec, data: np.ndarray, min_seconds: float
                 ) -> tuple[float, np.ndarray]:
    """The seconds of the plain call (bytes in, bytes out) and its last result."""
    plain, last = data.tobytes(), []

    def call() -> None:
        last[:] = [library_call(job, device, plain, None)]

    seconds = repeat(lambda: wall(call), min_seconds)
    return seconds, np.frombuffer(last[0], np.uint8)


def _kernels_at_once(devices: list[Device], job: _Job, data: np.ndarray, min_seconds: float
                     ) -> float | None:
    """A team's kernel figure: each of its devices with kernels (not the host engine)
    measuring its own kernel figure on the data in its own memory, all at once (a
    thread each), the GB/s summed. None where fewer than two members have kernels."""
    members = [d for d in devices if d.type != "host"]
    if len(members) < 2:
        return None

    def kernel_seconds(device: Device) -> float:
        return engine_for(device).resident_seconds(
            job.mode, job.key, job.iv, data, job.output_bytes(data.nbytes), min_seconds)[0]

    with ThreadPoolExecutor(len(members)) as pool:
        seconds = list(pool.map(kernel_seconds, members))
    return round(sum(gb_s(data.nbytes, each) for each in seconds), 3)


def _measure_engines(devices: list[Device], spec: DevicesSpec, job: _Job, data: np.ndarray,
                     reference: np.ndarray | None, min_seconds: float,
                     pinned: tuple[np.ndarray, np.ndarray] | None,
                     processes: _Processes | None = None) -> Result:
    """host->host (and pinned->pinned, given pinned memory) of one library call on the
    host engine or on a job split over ``devices`` (named by ``spec``), with each
    device's share; for a team, its kernel figure (:func:`_kernels_at_once`) and, given
    ``processes``, their yardstick."""
    size, out_bytes = data.nbytes, job.output_bytes(data.nbytes)
    outputs = [np.empty(out_bytes, np.uint8)]
    host = repeat(lambda: wall(lambda: library_call(job, spec, data, outputs[0])),
                   min_seconds)
    pinned_seconds = None
    if pinned is not None:
        pinned_in, pinned_out = pinned[0][:size], pinned[1][:out_bytes]
        pinned_in[:] = data
        outputs.append(pinned_out)
        pinned_seconds = repeat(
            lambda: wall(lambda: library_call(job, spec, pinned_in, pinned_out)), min_seconds)
    shares = teams.team(spec).shares
    units = sum(share.units for share in shares)
    plain_seconds, plain_out = _plain_calls(job, spec, data, min_seconds)
    outputs.append(plain_out)
    verified = None if reference is None else all(
        np.array_equal(out, reference) for out in outputs)
    team_kernel = _kernels_at_once(devices, job, data, min_seconds)
    return Result(job.mode, 8 * len(job.key), size, team_kernel, None, gb_s(size, host),
                  verified, None if pinned_seconds is None else gb_s(size, pinned_seconds),
                  {share.device.id: round(share.units / units, 3) for share in shares}
                  if len(devices) > 1 and units else None, gb_s(size, plain_seconds),
                  None if processes is None else processes.gb_s(job, size, min_seconds))


class _Processes:
    """``bench --processes``: a team's yardstick. One process a device of the team (the
    host engine's too), each with pinned memory of its own device
    (``aescl.pinned_empty``), all running the same library call at once; the sum of
    their GB/s is what the host gives that many independent jobs, which no split within
    one process can pass. (On 4 x H200 it was 85 GB/s, not 4 x one GPU's 49:
    docs/benchmarks, issue 57.)

    The processes are fresh interpreters (``python -c``, not multiprocessing's spawn,
    which would run the caller's main script again), started once for every
    configuration, and spoken to in JSON lines: each warms up and says so, and all
    start timing when every one has (the "go")."""

    def __init__(self, devices: list[Device], largest: int) -> None:
        code = "from aescl.bench import _yardstick_process; _yardstick_process()"
        self._processes = [
            subprocess.Popen([sys.executable, "-c", code, device.id, str(largest)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            for device in devices]

    def _ask(self, message: dict[str, Any]) -> list[Any]:
        try:
            for process in self._processes:
                process.stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
                process.stdin.flush()  # type: ignore[union-attr]
            replies = [json.loads(process.stdout.readline() or "null")  # type: ignore[union-attr]
                       for process in self._processes]
        except (OSError, ValueError):
            replies = [None]
        for reply in replies:
            if not isinstance(reply, (int, float)):
                raise RuntimeError(f"bench --processes: {reply or 'a process ended'}")
        return replies

    def gb_s(self, job: _Job, size: int, min_seconds: float) -> float:
        self._ask({"mode": job.mode, "key": job.key.hex(), "iv": job.iv.hex(),
                   "size": size, "min_seconds": min_seconds})  # (each warmed up: ready)
        seconds = self._ask({"go": True})
        return round(sum(gb_s(size, each) for each in seconds), 3)

    def close(self) -> None:
        for process in self._processes:
            try:
                process.stdin.close()  # type: ignore[union-attr]
                process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                process.kill()
                process.wait()
            process.stdout.close()  # type: ignore[union-attr]


def _yardstick_process() -> None:
    """One process of :class:`_Processes` (arguments: the device's id, the largest
    size): for each configuration asked on stdin, a warm-up and ``0`` ("ready"), then on
    "go" the median seconds of the call on its own pinned memory; the error's text in
    place of a number."""
    device_id, largest = sys.argv[1], int(sys.argv[2])
    try:
        device = get_device(device_id)
        slack = largest // chunked.CHUNK_SIZE * chunked.TAG_SIZE + chunked.TAG_SIZE
        source, target = pinned_empty(largest, device), pinned_empty(largest + slack, device)
        source[:] = np.random.default_rng().integers(0, 256, largest, dtype=np.uint8)
        for line in sys.stdin:
            asked = json.loads(line)
            job = _Job(asked["mode"], bytes.fromhex(asked["key"]), bytes.fromhex(asked["iv"]))
            piece, out = source[: asked["size"]], target[: job.output_bytes(asked["size"])]

            def call(job: _Job = job, piece: np.ndarray = piece, out: np.ndarray = out) -> None:
                library_call(job, device, piece, out)
            call()  # (built, tuned, memory touched)
            print(0, flush=True)
            sys.stdin.readline()  # ("go": every process is ready)
            print(repeat(lambda: wall(call), asked["min_seconds"]), flush=True)
    except Exception as exc:
        print(json.dumps(f"{device_id}: {type(exc).__name__}: {exc}"), flush=True)


def _measure_device(device: Device, job: _Job, data: np.ndarray,
                    reference: np.ndarray | None, min_seconds: float,
                    pinned: tuple[np.ndarray, np.ndarray]) -> Result:
    """The four figures of one configuration. ``pinned`` is (input, output) page-locked
    memory (aescl.pinned_empty) at least as large as the largest size."""
    size, out_bytes = data.nbytes, job.output_bytes(data.nbytes)
    kernel, resident = engine_for(device).resident_seconds(
        job.mode, job.key, job.iv, data, out_bytes, min_seconds)
    outputs = [np.empty(out_bytes, np.uint8)]
    host = repeat(lambda: wall(lambda: library_call(job, device, data, outputs[0])),
                  min_seconds)
    pinned_in, pinned_out = pinned[0][:size], pinned[1][:out_bytes]
    pinned_in[:] = data
    outputs.append(pinned_out)
    pinned_seconds = repeat(lambda: wall(lambda: library_call(job, device, pinned_in,
                                                              pinned_out)), min_seconds)
    plain_seconds, plain_out = _plain_calls(job, device, data, min_seconds)
    outputs.append(plain_out)
    verified = None if reference is None else all(
        np.array_equal(out, reference) for out in outputs)
    return Result(job.mode, 8 * len(job.key), size, gb_s(size, kernel),
                  gb_s(size, resident), gb_s(size, host), verified,
                  gb_s(size, pinned_seconds), bytes_gb_s=gb_s(size, plain_seconds))


# ---- the run ---------------------------------------------------------------------------

def _store_rates(devices: list[Device], targets: list[Target]) -> None:
    """Keep each device's host->host figures at its largest measured size (CTR for block
    work, the chunked format for chunks), which the default device is chosen by, and its
    pinned->pinned ones (for jobs on memory it reads directly)."""
    by_id = {d.id: d for d in devices}
    for target in targets:
        device = by_id.get(target.id)
        if device is None or target.backend not in ("opencl", "cuda", "host-engine"):
            continue
        if target.start_s is not None:
            rates.store_start(device, target.start_s)
        for kind, mode in (("blocks", "ctr"), ("chunks", "gcm-chunked")):
            results = [r for r in target.results
                       if r.mode == mode and r.host_gb_s and r.verified is not False]
            if results:
                largest = max(r.bytes for r in results)
                figure = min((r for r in results if r.bytes == largest),
                             key=lambda r: r.key_bits)
                measured = {kind: figure.host_gb_s}
                if figure.pinned_gb_s:
                    measured[kind + rates.PINNED] = figure.pinned_gb_s
                rates.store_rates(device, measured, largest)


def run(devices: list[Device], settings: Settings | None = None,
        progress: Progress = lambda message: None) -> Report:
    """Bench ``devices`` (and the host baselines, unless turned off) as ``settings`` say."""
    settings = settings or Settings()
    targets: list[Target] = []
    baselines = host_baselines() if settings.host_baselines else []
    engines_only = [d for d in devices if d.type == "host"]  # the host engine
    devices = [d for d in devices if d.type != "host"]  # OpenCL devices and CUDA GPUs
    # The split job: every benched device, as `all` has them (GPUs and accelerators, a GPU
    # that two engines see once, the host engine, OpenCL CPUs). It runs as `all` where it
    # is every device `all` names; a part of them runs as a list of devices.
    # The GPUs alone are a team of their own where there are several and `all` has more.
    gpus = teams.one_engine_per_gpu([d for d in devices if d.type in ("gpu", "accelerator")])
    team = gpus + engines_only + [d for d in devices if d.type == "cpu"]
    team_spec: DevicesSpec = team
    if {d.id for d in team} == {d.id for d in teams.resolve_devices("all")}:
        team_spec = "all"
    for device in devices:
        progress(f"{device.name}: kernel build times and transfers")
        limit = device_limit(device)
        largest = max([s for s in settings.sizes if s <= limit], default=min(settings.sizes))
        figures = engine_for(device).device_figures(min(largest, _TRANSFER_LIMIT),
                                                    settings.min_seconds)
        targets.append(Target(
            device.id, device.name, device.engine, device.type, device.driver_version, limit,
            build=figures["build"], launch=figures["launch"], transfer=figures["transfer"],
            start_s=figures.get("start_s"),
        ))
    targets.extend(target for target, _ in baselines)
    engine_rows: list[tuple[list[Device], DevicesSpec, Target]] = [
        ([d], [d], Target(d.id, d.name, "host-engine", "host", d.driver_version,
                          device_limit(d)))
        for d in engines_only]
    if len(gpus) > 1 and len(gpus) < len(team):
        engine_rows.append((gpus, gpus, Target(
            "gpus", " + ".join(d.id for d in gpus), "scheduler", "gpus",
            max_bytes=min(device_limit(d) for d in gpus))))
    if len(team) > 1:
        engine_rows.append((team, team_spec, Target(
            "all", " + ".join(d.id for d in team), "scheduler", "all",
            max_bytes=min(device_limit(d) for d in team))))
    targets.extend(target for _, _, target in engine_rows)

    data = np.random.default_rng().integers(0, 256, max(settings.sizes), dtype=np.uint8)
    pinned: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    # Each device's own; the host engine's and the split's are aescl.pinned_empty of
    # their devices: shared with the host engine's worker processes (and pinned for
    # the split's GPU), so pinned->pinned shows the engine working apart from the
    # interpreter.
    owners: list[tuple[str, DevicesSpec, Target]] = [
        (d.id, d, t) for d, t in zip(devices, targets, strict=False)]
    owners += [(target.id, members, target) for members, _, target in engine_rows]

    def largest_for(target: Target) -> int:
        return max([s for s in settings.sizes if s <= (target.max_bytes or 0)], default=0)

    for key, owner, target in owners:
        largest = largest_for(target)
        output_slack = largest // chunked.CHUNK_SIZE * chunked.TAG_SIZE + chunked.TAG_SIZE
        pinned[key] = (pinned_empty(largest, owner),
                       pinned_empty(largest + output_slack, owner))
    yardsticks = {target.id: _Processes(members, largest_for(target))
                  for members, _, target in engine_rows
                  if settings.processes and len(members) > 1}
    try:
        _measure_all(settings, baselines, devices, targets, engine_rows, data, pinned,
                     yardsticks, progress)
    finally:
        for yardstick in yardsticks.values():
            yardstick.close()
    _store_rates([*devices, *engines_only], targets)
    return Report(
        aescl_version=__version__,
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        host={"python": platform.python_version(), "platform": platform.platform(),
              "cpus": os.cpu_count(), "pyopencl": _version_of("pyopencl")},
        settings={"modes": list(settings.modes), "key_bits": list(settings.key_bits),
                  "sizes": list(settings.sizes), "min_seconds": settings.min_seconds,
                  "measures": {m: MEASURE_LABELS[m] for m in MEASURES}},
        targets=targets,
    )


def _measure_all(settings: Settings, baselines: list[tuple[Target, Callable[[_Job], HostRun]]],
                 devices: list[Device], targets: list[Target],
                 engine_rows: list[tuple[list[Device], DevicesSpec, Target]],
                 data: np.ndarray, pinned: dict[str, tuple[np.ndarray, np.ndarray]],
                 yardsticks: dict[str, _Processes], progress: Progress) -> None:
    """Every configuration and size on the baselines, each device and each engine row."""
    for mode, bits in settings.configurations():
        job = _Job(mode, os.urandom(bits // 8), os.urandom(
            chunked.NONCE_SIZE if mode == "gcm-chunked" else 16))
        for size in settings.sizes:
            piece = data[:size]
            reference: np.ndarray | None = None
            for target, make_run in baselines:
                progress(f"{target.name}: {mode} AES-{bits} {format_size(size)}")
                out = np.empty(job.output_bytes(size) + _SLACK, np.uint8)
                seconds = _time_host(make_run(job), piece, out, settings.min_seconds)
                out = out[: job.output_bytes(size)]
                verified = None if reference is None else bool(np.array_equal(out, reference))
                reference = out if reference is None else reference
                target.results.append(
                    Result(mode, bits, size, None, None, gb_s(size, seconds), verified))
            for device, target in zip(devices, targets, strict=False):
                if size > (target.max_bytes or 0):
                    continue
                progress(f"{device.name}: {mode} AES-{bits} {format_size(size)}")
                target.results.append(_measure_device(
                    device, job, piece, reference, settings.min_seconds, pinned[device.id]))
            for members, spec, target in engine_rows:
                if size > (target.max_bytes or 0):
                    continue
                progress(f"{target.id}: {mode} AES-{bits} {format_size(size)}")
                target.results.append(_measure_engines(
                    members, spec, job, piece, reference, settings.min_seconds,
                    pinned.get(target.id), yardsticks.get(target.id)))
