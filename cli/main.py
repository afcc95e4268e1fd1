"""Entry point of the ``aescl`` command."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import stat
import sys
from pathlib import Path
from typing import Any

import click

import aescl
from aescl import benchreport, chunked, fileformat, filejobs, raw
from aescl.devices import NO_PLATFORM_HINT, icd_report
from aescl.devices import matches as device_matches

from .files import (
    STDIO,
    Refusal,
    atomic_output,
    check_output,
    default_output,
    describe_os_error,
    is_stream,
    open_input,
    reserving,
)

# Exit codes (docs/cli.md).
EXIT_FAILED = 1       # the job failed: I/O, OpenCL or input that is not what was promised
EXIT_USAGE = 2        # refused before any work: bad arguments or an unsafe output
EXIT_REJECTED = 3     # the data was rejected: wrong key, bad padding, tampering, truncation
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM, as a shell reports a process SIGTERM ended
EXIT_BROKEN_PIPE = 141  # the reader of standard output went away: stop quietly, as `cat` does


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:.1f} GiB"


def _kib(nbytes: int) -> str:
    return f"{nbytes // 1024} KiB"


def _device_rows(found: list[aescl.Device]) -> list[tuple[str, ...]]:
    header = ("ID", "TYPE", "VENDOR", "NAME", "CUS", "CLOCK", "MEMORY", "LOCAL",
              "MAX ALLOC", "OPENCL C", "DRIVER")
    rows = [header]
    for d in found:
        rows.append((
            d.id, d.type, d.vendor, d.name, str(d.compute_units), f"{d.clock_mhz} MHz",
            _gib(d.global_mem_bytes), _kib(d.local_mem_bytes), _gib(d.max_alloc_bytes),
            d.opencl_c_version.replace("OpenCL C ", ""), d.driver_version,
        ))
    return rows


def _print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        click.echo("  ".join(cells).rstrip())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(aescl.__version__, prog_name="aescl")
def main() -> None:
    """AES on any OpenCL device (NVIDIA, AMD, Intel GPUs and CPUs through PoCL)."""


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that every clean-up runs, as Ctrl-C's does."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def run() -> None:
    """The ``aescl`` console script: :func:`main`, then a quick exit.

    By the time main returns, every output file is written, closed and renamed
    into place, so the process leaves without tearing the OpenCL runtime down:
    that teardown (contexts, pinned staging, the driver's threads) took 0.1 s
    of every run on the H200 host, for resources the kernel frees at exit anyway.

    SIGTERM ends it as Ctrl-C does: the job's files are removed, one line says so,
    and the exit code is 143.
    """
    signal.signal(signal.SIGTERM, _terminate)
    try:
        main()  # standalone mode: always ends in SystemExit
        status: object = 0
    except SystemExit as exit_request:
        status = exit_request.code
    except Terminated:  # outside a job (a prompt, planning): nothing was written
        click.echo("aescl: terminated", err=True)
        status = EXIT_TERMINATED
    if status is None:
        status = 0
    elif not isinstance(status, int):  # sys.exit("message"), as Python reports it
        click.echo(str(status), err=True)
        status = EXIT_FAILED
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away: nothing more to say to it
        status = status or EXIT_BROKEN_PIPE
    except (OSError, AttributeError) as exc:  # (no stdout at all: nothing to flush)
        if isinstance(exc, OSError):
            click.echo(f"aescl: cannot write standard output: {exc.strerror or exc}",
                       err=True)
            status = status or EXIT_FAILED
    with contextlib.suppress(OSError, AttributeError):
        sys.stderr.flush()
    os._exit(status)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the devices as JSON.")
@click.option("--verbose", "-v", is_flag=True,
              help="Also explain the OpenCL setup: ICD files, drivers aescl registered, "
                   "problems and their fixes, and the kernel cache.")
def devices(as_json: bool, verbose: bool) -> None:
    """List OpenCL platforms and devices (simulators included), then the host engine."""
    from aescl.diagnostics import diagnose

    found = aescl.devices()
    report = icd_report()
    registered = report.registered_by_aescl
    findings = diagnose() if verbose else []
    if as_json:
        click.echo(json.dumps({
            "devices": [d.to_dict() for d in found],
            "icd": {
                "vendors_dir": str(report.vendors_dir),
                "icd_files": {str(f.path): f.library for f in report.icd_files},
                "registered_by_aescl": {v: str(p) for v, p in registered.items()},
                "private_vendors_dir": str(report.private_dir) if report.private_dir else None,
            },
            **({"diagnostics": [f.to_dict() for f in findings]} if verbose else {}),
        }, indent=2))
    else:
        if found:
            _print_table(_device_rows(found))
        for vendor, library in registered.items():
            click.echo(
                f"note: registered the {vendor} OpenCL driver {library}, which has no .icd file "
                f"in {report.vendors_dir} (for aescl's process only)"
            )
        if findings:
            click.echo("")
        for finding in findings:
            prefix = "" if finding.level == "info" else f"{finding.level}: "
            click.echo(prefix + finding.message)
            if finding.fix:
                click.echo(f"  fix: {finding.fix}")
    _warn_of_default_spec()
    if not any(d.is_opencl for d in found):  # the host engine still works
        click.echo(f"aescl: {NO_PLATFORM_HINT}; until then the host engine (host) runs "
                   "every job", err=True)
        sys.exit(1)


def _warn_of_default_spec() -> None:
    """Say so when $AESCL_DEVICE names no device: every job without --device would fail."""
    spec = os.environ.get("AESCL_DEVICE")
    if not spec:
        return
    try:
        aescl.scheduler.resolve_devices(spec)
    except aescl.DeviceNotFound as exc:
        click.echo(f"aescl: warning: AESCL_DEVICE={spec!r} names no device, so jobs "
                   f"without --device fail: {str(exc).splitlines()[0]}", err=True)


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


class _JobFailed(click.ClickException):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file=None) -> None:  # one line: "aescl: <what went wrong>"
        click.echo(f"aescl: {self.format_message()}", err=True)


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


def _without_line_end(text: bytes) -> bytes:
    """The passphrase rule for every source: one line end (``\\n`` or ``\\r\\n``) at
    the end is not part of it (``echo pw > file``, ``export AESCL_PASSPHRASE="$(cat
    file)"``); anything before it is. The prompt's answer never has one."""
    for end in (b"\r\n", b"\n"):
        if text.endswith(end):
            return text[: -len(end)]
    return text


def _read_passphrase(passphrase_file: str | None, confirm: bool) -> bytes:
    """From --passphrase-file, else $AESCL_PASSPHRASE, else a prompt on the terminal (no echo)."""
    if passphrase_file is not None:
        try:
            text = _without_line_end(Path(passphrase_file).read_bytes())
        except OSError as exc:
            raise Refusal(f"cannot read the passphrase file: {exc.strerror}") from None
    elif "AESCL_PASSPHRASE" in os.environ:
        text = _without_line_end(os.fsencode(os.environ["AESCL_PASSPHRASE"]))
    else:
        try:
            with open("/dev/tty"):
                pass
        except OSError:
            raise Refusal("no terminal to ask for the passphrase; use --passphrase-file "
                          "or AESCL_PASSPHRASE") from None
        text = click.prompt("passphrase", hide_input=True, confirmation_prompt=confirm,
                            err=True).encode()
    if not text:
        raise Refusal("the passphrase is empty")
    return text


def _payload_options(command):
    for option in reversed([
        click.option("--key-file", metavar="FILE", type=click.Path(dir_okay=False),
                     help="Key from FILE: 32 raw bytes or 64 hex digits (aescl keygen)."),
        click.option("--passphrase", "use_passphrase", is_flag=True,
                     help="Ask for a passphrase (no echo; twice when encrypting). "
                          "$AESCL_PASSPHRASE is used instead when set."),
        click.option("--passphrase-file", metavar="FILE",
                     help="Read the passphrase from FILE (one line end at its end is ignored, as "
                          "in $AESCL_PASSPHRASE)."),
        click.option("--batch-chunks", type=click.IntRange(1, chunked.MAX_BATCH_CHUNKS),
                     default=chunked.DEFAULT_BATCH_CHUNKS, show_default=True,
                     help="16 KiB chunks per device launch; up to 6 launches are in "
                          "flight, using about 12 x this x 16 KiB of pinned host memory "
                          "and as much on the device."),
    ]):
        command = option(command)
    return command


def _crypt_command(decrypt: bool):
    verb = "decrypt" if decrypt else "encrypt"

    @click.argument("input_paths", metavar="[INPUT]...", nargs=-1, callback=_existing_inputs)
    @click.option("-o", "--output", "output_path", metavar="OUTPUT",
                  help="Output file, or - for standard output (one INPUT only). Default: "
                       "INPUT.aescl when encrypting, INPUT without .aescl when decrypting; "
                       "standard output when reading standard input.")
    @_payload_options
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
    @click.option("--device", "device", metavar="SPEC", multiple=True, callback=_device_specs,
                  help="Device spec (gpu, cpu, nvidia, 0:1, host, ...); repeat it, or say all "
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
            keys = _FormatKeys(decrypt, key_file, use_passphrase, passphrase_file, work_factor)
            job = keys.stream_job(batch_chunks)
        if not several:
            _crypt_one(decrypt, raw_mode, job, inputs[0], output_path, device, force, quiet)
            return
        outputs = [output_path] if output_path else [default_output(i, decrypt) for i in inputs]
        named = [os.path.abspath(_local_path(o)) if _is_local(o) else o for o in outputs]
        if len(set(named)) < len(named):
            twice = next(o for o, n in zip(outputs, named, strict=True) if named.count(n) > 1)
            raise Refusal(f"two inputs would be written to the same output, {twice}")
        for source, output in zip(inputs, outputs, strict=True):
            if _is_local(output) and _is_local(source):
                check_output(_local_path(source), _local_path(output), force)
                if is_stream(_local_path(output)):
                    raise Refusal(f"{output} is a FIFO or a device: a job over several "
                                  "files or on a cluster writes regular files only")
        with _job_errors(decrypt, outputs[0] if len(outputs) == 1 else "the outputs"):
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
    return main.command(name=verb)(command)


def _existing_inputs(ctx, param, values: tuple[str, ...]) -> tuple[str, ...]:
    """Local inputs must exist and be files; URLs are checked where they are read."""
    for value in values:
        if value == STDIO or not _is_local(value):
            continue
        try:
            status = os.stat(_local_path(value))
        except FileNotFoundError:
            raise click.BadParameter(f"{value} does not exist", ctx, param) from None
        except OSError as exc:  # a name too long, a loop of links, no permission, ...
            raise click.BadParameter(f"{value}: {exc.strerror or exc}", ctx, param) from None
        if stat.S_ISDIR(status.st_mode):
            raise click.BadParameter(f"{value} is a directory", ctx, param)
    return values


def _device_specs(ctx, param, values: tuple[str, ...]) -> tuple[str, ...]:
    """--device: every spec names something (an empty one would mean the default)."""
    for value in values:
        if not value.strip():
            raise click.BadParameter("an empty spec; name a device (aescl devices lists "
                                     "them) or say all", ctx, param)
    return values


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def _local_path(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


@contextlib.contextmanager
def _job_errors(decrypt: bool, output_label: str):
    """Every failure of a job as one line and its exit code (docs/cli.md)."""
    try:
        yield
    except aescl.WrongKeyError:
        raise _JobFailed("wrong key or passphrase", EXIT_REJECTED) from None
    except aescl.KeySourceError as exc:
        raise _JobFailed(str(exc), EXIT_USAGE) from None
    except aescl.TruncatedError as exc:  # encrypting: the input changed, not bad data
        raise _JobFailed(str(exc), EXIT_REJECTED if decrypt else EXIT_FAILED) from None
    except (aescl.AuthenticationError, aescl.FormatError, aescl.PaddingError) as exc:
        raise _JobFailed(str(exc), EXIT_REJECTED) from None
    except KeyboardInterrupt:
        click.echo("aescl: interrupted; no output written", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except Terminated:
        click.echo("aescl: terminated; no output written", err=True)
        sys.exit(EXIT_TERMINATED)
    except BrokenPipeError:
        if output_label != STDIO:
            raise _JobFailed(f"broken pipe writing {output_label}", EXIT_FAILED) from None
        sys.exit(EXIT_BROKEN_PIPE)
    except OSError as exc:
        raise _JobFailed(describe_os_error(exc, output_label), EXIT_FAILED) from None
    except (ValueError, aescl.AesclError) as exc:
        raise _JobFailed(str(exc).splitlines()[0], EXIT_FAILED) from None


def _crypt_one(decrypt, raw_mode, job, input_path, output_path, device, force, quiet) -> None:
    """One input, streamed in this process: standard input and output allowed."""
    output_path = output_path or default_output(input_path, decrypt)
    check_output(input_path, output_path, force)
    size = os.path.getsize(input_path) if input_path != STDIO and os.path.isfile(
        input_path) else 0
    progress = _Progress(size, quiet)
    with _job_errors(decrypt, output_path):
        with open_input(input_path) as source, atomic_output(output_path, force) as sink:
            reserve = None
            if not is_stream(output_path):
                bound = (raw if raw_mode else fileformat).output_size_bound
                reserve = bound(source, decrypt)
            with reserving(sink, reserve):  # while the device is found and set up
                job(source, sink, _chosen_device(device), progress.update)
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
        raise _JobFailed(f"cannot reach the Dask scheduler at {address}: {exc}",
                         EXIT_FAILED) from None
    except BaseException:
        plan.discard()
        raise
    with client:
        try:
            on_dask.run(client, plan, resources or None, progress, resources_wait)
        except on_dask.KilledWorker as exc:
            raise _JobFailed(f"a task killed its worker too often: {exc}", EXIT_FAILED) from None


def _chosen_device(specs: tuple[str, ...]) -> list[aescl.Device | str] | None:
    """The devices of --device (repeated, or ``all``); none given: $AESCL_DEVICE, else
    None, for the library's default (a small job then never starts OpenCL). The specs
    are checked here and passed on as given, so that ``all`` keeps its meaning."""
    if not specs and not os.environ.get("AESCL_DEVICE"):
        return None
    try:
        found = aescl.scheduler.resolve_devices(list(specs) if specs else None)
    except aescl.DeviceNotFound as exc:
        raise Refusal(str(exc)) from None
    return list(specs) if specs else list(found)


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


class _FormatKeys:
    """The authenticated format's key for a command: read once (one prompt, one scrypt)
    whether it encrypts one stream or a whole set of files."""

    def __init__(self, decrypt, key_file, use_passphrase, passphrase_file, work_factor):
        if key_file and (use_passphrase or passphrase_file):
            raise Refusal("choose one key: --key-file, or a passphrase")
        self._decrypt = decrypt
        key = None
        if key_file:
            try:
                key = fileformat.read_key_file(key_file)
            except OSError as exc:
                raise Refusal(f"cannot read the key file: {exc.strerror}") from None
            except aescl.FormatError as exc:
                raise Refusal(str(exc)) from None
        if decrypt:
            self.ring = fileformat.KeyRing(
                key, None if key else lambda: _read_passphrase(passphrase_file, False))
            return
        passphrase = None
        if key is None:
            if not (use_passphrase or passphrase_file or "AESCL_PASSPHRASE" in os.environ):
                raise Refusal("choose a key: --passphrase, --passphrase-file FILE or --key-file "
                              "FILE (aescl keygen -o FILE makes one)")
            passphrase = _read_passphrase(passphrase_file, confirm=True)
        self._key, self._passphrase, self._work_factor = key, passphrase, work_factor
        self._payload: fileformat.PayloadKey | None = None

    def payload(self) -> fileformat.PayloadKey:
        if self._payload is None:
            self._payload = fileformat.PayloadKey.new(self._key, self._passphrase,
                                                      self._work_factor)
        return self._payload

    def stream_job(self, batch_chunks):
        def job(source, sink, device, progress):
            if self._decrypt:
                fileformat.decrypt_payload(source, sink, self.ring.read(source), device=device,
                                           batch_chunks=batch_chunks, progress=progress)
            else:
                fileformat.encrypt_payload(source, sink, self.payload(), device=device,
                                           batch_chunks=batch_chunks, progress=progress)
        return job

    def plan(self, inputs, outputs, device, force, in_process) -> filejobs.Plan:
        """A job over files: in this process one task per file (each on every chosen
        device); on a cluster, large local files split into ranges."""
        specs = list(device) or None
        if in_process:
            _chosen_device(device)  # an unknown spec is refused here, before any work
        range_bytes = None if in_process else filejobs.DEFAULT_RANGE_BYTES
        if self._decrypt:
            return filejobs.plan_decrypt(inputs, self.ring, outputs, device=specs,
                                         range_bytes=range_bytes, replace=force,
                                         in_process=in_process)
        return filejobs.plan_encrypt(inputs, self.payload(), outputs, device=specs,
                                     range_bytes=range_bytes, replace=force,
                                     in_process=in_process)


encrypt = _crypt_command(decrypt=False)
decrypt = _crypt_command(decrypt=True)


@main.command()
@click.option("-o", "--output", "output_path", metavar="FILE", required=True,
              help="Where to write the new key file (mode 0600).")
@click.option("-f", "--force", is_flag=True, help="Replace an existing file.")
def keygen(output_path: str, force: bool) -> None:
    """Write a new random 256-bit key file (64 hex digits) for --key-file."""
    path = Path(output_path)
    if path.is_dir():
        raise Refusal(f"{output_path} is a directory")
    if path.exists() and not force:
        raise Refusal(f"{output_path} exists; use --force to replace it")
    try:
        if force and path.exists():
            path.unlink()
        fileformat.write_new_key_file(path)
    except OSError as exc:
        raise _JobFailed(f"cannot write {output_path}: {exc.strerror}", EXIT_FAILED) from None


def _size_list(ctx, param, value: str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    try:
        sizes = tuple(benchreport.parse_size(part) for part in value.split(",") if part.strip())
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if not sizes:
        raise click.BadParameter(f"no size in {value!r}; e.g. 16K,4M,1G")
    return sizes


def _finite(ctx, param, value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number of seconds")
    return value


@main.command(name="bench")
@click.option("--device", "device_specs", metavar="SPEC", multiple=True,
              callback=_device_specs,
              help="Device spec to bench; repeat for several. Default: all, every real "
                   "device (the simulator only when named).")
@click.option("--mode", "modes", type=click.Choice(benchreport.MODES), multiple=True,
              help="Mode to bench; repeat for several. Default: all.")
@click.option("--key-bits", type=click.Choice(["128", "192", "256"]), multiple=True,
              help="Key size; repeat for several. Default: all (gcm-chunked is AES-256 only).")
@click.option("--sizes", callback=_size_list, metavar="LIST",
              help="Input sizes, e.g. 16K,4M,1G (multiples of 16 bytes). Default: 16K, 256K, "
                   "4M, 64M, 1G, each device limited by its memory.")
@click.option("--quick", is_flag=True, help="A short run: 16K, 1M and 16M, brief timing.")
@click.option("--min-time", type=click.FloatRange(0, 60), default=None, metavar="SECONDS",
              callback=_finite,
              help="Keep timing each figure at least this long (default 0.2, --quick 0.02).")
@click.option("--no-host", is_flag=True, help="Skip the host baselines (pycryptodome, OpenSSL).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--plot", "plot_path", metavar="FILE.png", type=click.Path(dir_okay=False),
              help="Also draw throughput against size to FILE.png (needs aescl[plot]).")
@click.option("--load", "load_path", metavar="FILE.json", type=click.File("r"),
              help="Measure nothing: print (and --plot) a report saved with --json.")
@click.option("--tune", is_flag=True,
              help="First tune each device's launch settings again (work-group size, grid, "
                   "table copies) and keep them for later runs. GPUs are otherwise tuned once, "
                   "on first use; CPUs keep their defaults until tuned here.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def bench_command(device_specs, modes, key_bits, sizes, quick, min_time, no_host, as_json,
                  plot_path, load_path, tune, quiet) -> None:
    """Measure throughput on each device and on the host, in GB/s.

    Four figures per device, mode, key size and input size: kernel (OpenCL
    event profiling, data in device memory), resident (enqueue to completion,
    data in device memory, separate output buffer), host->host (one library
    call on host memory, both transfers included) and pinned->pinned (the same
    with page-locked input and output). Host baselines run the same
    work on one CPU thread; every device's output is checked against theirs.
    Also reports cold and warm kernel build times and pinned transfer rates.
    Exit status 1 if any output differs from the reference.
    """
    if plot_path:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise Refusal("--plot needs matplotlib: pip install 'aescl[plot]'") from None
    if tune and load_path is not None:
        raise Refusal("--tune measures; --load only prints a saved report")
    if tune and not aescl.tuning.tuning_enabled():
        raise Refusal("--tune would be ignored: AESCL_TUNE=0 keeps the default launch settings")
    if load_path is not None:
        try:
            report = benchreport.Report.from_dict(json.load(load_path))
        except (ValueError, KeyError, TypeError) as exc:
            raise Refusal(f"{load_path.name} is not an aescl bench --json report ({exc})") from None
    else:
        report = _run_bench(device_specs, modes, key_bits, sizes, quick, min_time, no_host,
                            tune, quiet)
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else benchreport.table(report),
               nl=not as_json)
    if plot_path:
        benchreport.save_plot(report, plot_path)
    if report.mismatches:
        raise _JobFailed("output differs from the reference: " + "; ".join(report.mismatches),
                         EXIT_FAILED)


def _run_bench(device_specs, modes, key_bits, sizes, quick, min_time, no_host, tune, quiet
               ) -> benchreport.Report:
    from aescl import bench  # numpy and OpenCL: only when measuring

    base = benchreport.QUICK if quick else benchreport.Settings()
    try:
        settings = benchreport.Settings(
            modes=tuple(modes) or base.modes,
            key_bits=tuple(int(b) for b in key_bits) or base.key_bits,
            sizes=sizes or base.sizes,
            min_seconds=base.min_seconds if min_time is None else min_time,
            host_baselines=not no_host,
        )
    except ValueError as exc:
        raise Refusal(str(exc)) from None
    if not settings.configurations():
        raise Refusal("nothing to bench: gcm-chunked runs with --key-bits 256 only")
    chosen = _bench_devices(device_specs)
    progress = _BenchProgress(quiet)
    try:
        for device in chosen if tune else ():
            if not device.is_simulator:  # its settings are for coverage, not speed
                aescl.tuning.store(device, aescl.tuning.tune(device, progress=progress))
        return bench.run(chosen, settings, progress=progress)
    finally:
        progress.close()


def _bench_devices(specs: tuple[str, ...]) -> list[aescl.Device]:
    found = aescl.devices()
    if not found:
        raise _JobFailed(NO_PLATFORM_HINT, EXIT_FAILED)
    chosen: list[aescl.Device] = []
    for spec in specs or ("all",):
        if spec.strip().lower() == "all":
            matches = [d for d in found if not d.is_simulator]
        else:
            matches = [d for d in found if device_matches(d, spec)]
        if not matches:
            raise Refusal(f"no OpenCL device matches {spec!r}; see `aescl devices`")
        chosen.extend(d for d in matches if d not in chosen)
    return chosen


class _BenchProgress:
    """One status line on stderr: rewritten in place on a terminal, else a line per step."""

    def __init__(self, quiet: bool) -> None:
        self._quiet = quiet
        self._tty = sys.stderr is not None and sys.stderr.isatty()

    def __call__(self, message: str) -> None:
        if self._quiet:
            return
        if self._tty:
            click.echo(f"\r\033[Kbench: {message}", err=True, nl=False)
        else:
            click.echo(f"bench: {message}", err=True)

    def close(self) -> None:
        if self._tty and not self._quiet:
            click.echo("\r\033[K", err=True, nl=False)
