"""``aescl encrypt`` and ``aescl decrypt``: one input streamed in this process, or a job
over several files here or on a Dask cluster."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from aescl import fileformat, filejobs, raw

from .exits import EXIT_FAILED, JobFailed, Refusal, job_errors
from .files import (
    STDIO,
    atomic_output,
    check_output,
    default_output,
    is_stream,
    open_input,
    reserving,
)
from .keys import FormatKeys, payload_options
from .options import chosen_device, device_specs, existing_inputs, is_local, local_path


def _hex_option(name: str, value: str | None, lengths: tuple[int, ...]) -> bytes | None:
    if value is None:
        return None
    text = value.strip()
    try:
        decoded = bytes.fromhex(text)
    except ValueError:
        raise Refusal(f"{name} must be hexadecimal") from None
    if len(text) not in [2 * n for n in lengths]:
        digits = [str(2 * n) for n in lengths]
        wanted = f"{', '.join(digits[:-1])} or {digits[-1]}" if len(digits) > 1 else digits[0]
        raise Refusal(f"{name} must be exactly {wanted} hex digits, got {len(text)} "
                      "(never padded or truncated)")
    return decoded


class _Progress:
    """A progress bar on stderr over ``size`` input bytes (file inputs), shown only when
    stderr is a terminal.

    It appears on the first update, so that a passphrase prompt comes first.
    """

    def __init__(self, size: int, quiet: bool) -> None:
        self._size = size
        self._enabled = (bool(self._size) and not quiet and sys.stderr is not None
                         and sys.stderr.isatty())
        self._bar: Any = None

    def update(self, nbytes: int) -> None:
        if not self._enabled:
            return
        if self._bar is None:
            self._bar = click.progressbar(length=self._size, file=sys.stderr, label="aescl")
            self._bar.__enter__()
        self._bar.update(nbytes)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


def _crypt_command(decrypt: bool):
    verb = "decrypt" if decrypt else "encrypt"

    @click.argument("input_paths", metavar="[INPUT]...", nargs=-1, callback=existing_inputs)
    @click.option("-o", "--output", "output_path", metavar="OUTPUT",
                  help="Output file, or - for standard output (one INPUT only). Default: "
                       "INPUT.aescl when encrypting, INPUT without .aescl when decrypting; "
                       "standard output when reading standard input.")
    @payload_options
    @click.option("--raw", "raw_mode", is_flag=True,
                  help="Headerless output byte-compatible with `openssl enc`. UNAUTHENTICATED: "
                       "changes to the data go undetected.")
    @click.option("--mode", type=click.Choice(raw.RAW_MODES), default=None,
                  help="Raw mode cipher mode (default ctr). ECB leaks patterns: equal "
                       "plaintext blocks give equal ciphertext blocks.")
    @click.option("--key", "key_hex", metavar="HEX",
                  help="Raw mode key: 32, 48 or 64 hex digits (AES-128/192/256).")
    @click.option("--iv", "iv_hex", metavar="HEX",
                  help="Raw CTR: the initial 16-byte counter block, 32 hex digits (openssl -iv).")
    @click.option("--no-pad", is_flag=True, help="Raw ECB: no PKCS#7 padding (openssl -nopad).")
    @click.option("--device", "device", metavar="SPEC", multiple=True, callback=device_specs,
                  help="Device spec (gpu, nvidia, 0:1, cuda, host, ...); repeat it, or say all "
                       "(every GPU and the host's cores), to split the job over several "
                       "devices. Default: $AESCL_DEVICE, else chosen per job: the host "
                       "engine for small inputs, else the device measured fastest. With "
                       "--scheduler each worker resolves it on its own machine.")
    @click.option("--scheduler", "scheduler_address", metavar="ADDRESS",
                  help="Run on a Dask cluster (tcp://host:8786; needs aescl[dask]): a task "
                       "per file, large files split into ranges of whole chunks. Every path "
                       "must mean the same file on every worker (a shared file system, or an "
                       "fsspec URL).")
    @click.option("--resources", "worker_resources", metavar="NAME=N", multiple=True,
                  help="With --scheduler: run only on workers that have these Dask worker "
                       "resources (dask worker --resources GPU=1), e.g. GPU=1.")
    @click.option("--resources-wait", type=click.FloatRange(0, 86400), default=60.0,
                  show_default=True, metavar="SECONDS",
                  help="With --resources: how long to wait for a worker that has them to "
                       "join the cluster before failing (exit 1).")
    @click.option("--key-schedule", type=click.Choice(["host", "device"]), default="host",
                  show_default=True, help="Expand round keys on the host or on the device.")
    @click.option("-f", "--force", is_flag=True, help="Replace existing output files.")
    @click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
    def command(input_paths, output_path, key_file, use_passphrase, passphrase_file,
                batch_chunks, raw_mode, mode, key_hex, iv_hex, no_pad, device,
                scheduler_address, worker_resources, resources_wait, key_schedule, force, quiet,
                work_factor=fileformat.DEFAULT_WORK_FACTOR):
        inputs = list(input_paths) or [STDIO]
        # A URL (file://, s3://, ...) is read and written through the file jobs too.
        several = (len(inputs) > 1 or scheduler_address is not None
                   or any("://" in name for name in inputs))
        if several:
            if raw_mode:
                raise Refusal("--raw takes one INPUT and runs in this process")
            if STDIO in inputs:
                raise Refusal("standard input (-) can only be the one INPUT, without "
                              "--scheduler")
            if output_path is not None and len(inputs) > 1:
                raise Refusal("-o names one output; with several inputs each output is "
                              "named after its INPUT")
        elif worker_resources:
            raise Refusal("--resources only applies with --scheduler")
        resources = _resources(worker_resources)
        if scheduler_address is not None:
            _check_scheduler(scheduler_address)
        if raw_mode:
            if key_file or use_passphrase or passphrase_file:
                raise Refusal("--raw takes --key HEX; --key-file and passphrases are for the "
                              "authenticated format")
            job = _raw_job(decrypt, mode or "ctr", key_hex, iv_hex, no_pad, key_schedule)
        else:
            if mode or key_hex or iv_hex or no_pad:
                raise Refusal("--mode, --key, --iv and --no-pad only apply with --raw")
            keys = FormatKeys(decrypt, key_file, use_passphrase, passphrase_file, work_factor)
            job = keys.stream_job(batch_chunks)
        if not several:
            _crypt_one(decrypt, raw_mode, job, inputs[0], output_path, device, force, quiet)
            return
        outputs = [output_path] if output_path else [default_output(i, decrypt) for i in inputs]
        named = [os.path.abspath(local_path(o)) if is_local(o) else o for o in outputs]
        if len(set(named)) < len(named):
            twice = next(o for o, n in zip(outputs, named, strict=True) if named.count(n) > 1)
            raise Refusal(f"two inputs would be written to the same output, {twice}")
        _refuse_outputs_among_inputs(inputs, outputs)
        for source, output in zip(inputs, outputs, strict=True):
            if is_local(output) and is_local(source):
                check_output(local_path(source), local_path(output), force)
                if is_stream(local_path(output)):
                    raise Refusal(f"{output} is a FIFO or a device: a job over several "
                                  "files or on a cluster writes regular files only")
        with job_errors(decrypt, outputs[0] if len(outputs) == 1 else "the outputs"):
            plan = keys.plan(inputs, outputs, device, force,
                             in_process=scheduler_address is None)
            progress = _Progress(plan.input_bytes, quiet)
            try:
                if scheduler_address is None:
                    filejobs.run_here(plan, progress.update)
                else:
                    _run_on_cluster(scheduler_address, plan, resources, resources_wait,
                                    progress.update)
            finally:
                progress.close()

    if not decrypt:
        command = click.option(
            "--work-factor",
            type=click.IntRange(fileformat.MIN_WORK_FACTOR, fileformat.MAX_WORK_FACTOR),
            default=fileformat.DEFAULT_WORK_FACTOR, show_default=True,
            help="Passphrase: scrypt cost as log2 N (r=8, p=1), 10..20; memory 2^N KiB, "
                 "for encrypting and decrypting: 10 uses 1 MiB, 17 128 MiB, 20 1 GiB.",
        )(command)
    command.__doc__ = (
        f"{verb.capitalize()} INPUT (default: standard input).\n\n"
        "By default the output is aescl's authenticated format (docs/format.md): "
        "AES-256-GCM in 16 KiB chunks under a key from --key-file, or from a passphrase "
        "through scrypt. Decryption writes nothing unless every byte authenticates "
        "(to standard output it releases only authenticated chunks).\n\n"
        "--raw gives headerless AES-CTR or AES-ECB, byte-compatible with "
        "`openssl enc -K ... -iv ...`. Raw output is NOT authenticated, and ECB leaks patterns."
    )
    return click.command(name=verb)(command)


def _refuse_outputs_among_inputs(inputs: list[str], outputs: list[str]) -> None:
    """Refuse a job over several files where one's output is another input's own file
    (``encrypt --force a a.aescl``), with or without --force: it would replace an input,
    or read what it had written."""
    def identity(name: str) -> tuple[int, int] | None:
        try:
            status = os.stat(local_path(name))
        except OSError:
            return None
        return status.st_dev, status.st_ino

    sources = {identity(i) for i in inputs if is_local(i)} - {None}
    for output in outputs:
        if is_local(output) and identity(output) in sources:
            raise Refusal(f"{output} is one of the inputs: a job never writes over its own "
                          "inputs")


def _crypt_one(decrypt, raw_mode, job, input_path, output_path, device, force, quiet) -> None:
    """One input, streamed in this process: standard input and output allowed."""
    output_path = output_path or default_output(input_path, decrypt)
    check_output(input_path, output_path, force)
    size = os.path.getsize(input_path) if input_path != STDIO and os.path.isfile(
        input_path) else 0
    progress = _Progress(size, quiet)
    with job_errors(decrypt, output_path):
        with open_input(input_path) as source, atomic_output(output_path, force) as sink:
            reserve = None
            if not is_stream(output_path):
                bound = (raw if raw_mode else fileformat).output_size_bound
                reserve = bound(source, decrypt)
            with reserving(sink, reserve):  # while the device is found and set up
                job(source, sink, chosen_device(device), progress.update)
        progress.close()


def _resources(items: tuple[str, ...]) -> dict[str, float]:
    """--resources NAME=N, each N a positive number."""
    resources = {}
    for item in items:
        name, _, amount = item.partition("=")
        try:
            value = float(amount)
        except ValueError:
            value = float("nan")
        if not name.strip() or not 0 < value < float("inf"):
            raise Refusal(f"--resources takes NAME=N with N a positive number, not {item!r}")
        resources[name.strip()] = value
    return resources


def _check_scheduler(address: str) -> None:
    """Refuse, before any work, an address Dask cannot use, or Dask missing."""
    try:
        from aescl import distributed as on_dask
    except ImportError:
        raise Refusal("--scheduler needs Dask: pip install 'aescl[dask]'") from None
    try:
        on_dask.check_address(address)
    except ValueError as exc:
        raise Refusal(str(exc)) from None


def _run_on_cluster(address: str, plan, resources: dict[str, float], resources_wait: float,
                    progress) -> None:
    from aescl import distributed as on_dask

    try:
        client = on_dask.Client(address)  # waits distributed.comm.timeouts.connect
    except (OSError, TimeoutError) as exc:
        plan.discard()
        raise JobFailed(f"cannot reach the Dask scheduler at {address}: {exc}",
                         EXIT_FAILED) from None
    except BaseException:
        plan.discard()
        raise
    with client:
        try:
            on_dask.run(client, plan, resources or None, progress, resources_wait)
        except on_dask.KilledWorker as exc:
            raise JobFailed(f"a task killed its worker too often: {exc}", EXIT_FAILED) from None


def _raw_job(decrypt, mode, key_hex, iv_hex, no_pad, key_schedule):
    key = _hex_option("--key", key_hex, (16, 24, 32))
    if key is None:
        raise Refusal("--key is required with --raw")
    iv = _hex_option("--iv", iv_hex, (16,))
    if mode == "ctr" and iv is None:
        raise Refusal("--iv is required for CTR")
    if mode == "ecb" and iv is not None:
        raise Refusal("--iv does not apply: ECB takes no IV")
    if no_pad and mode != "ecb":
        raise Refusal("--no-pad only applies to ECB")

    def job(source, sink, device, progress):
        raw.transform(source, sink, key=key, mode=mode, decrypt=decrypt, iv=iv, pad=not no_pad,
                      device=device, key_schedule=key_schedule, progress=progress)

    return job


encrypt = _crypt_command(decrypt=False)
decrypt = _crypt_command(decrypt=True)
