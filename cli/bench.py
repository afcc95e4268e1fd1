"""``aescl bench``: throughput per device, mode and key size."""

from __future__ import annotations

import json
import math
import os
import sys

import click

import aescl
from aescl import benchreport, engines
from aescl.devices import NO_PLATFORM_HINT
from aescl.devices import matches as device_matches

from .exits import EXIT_FAILED, JobFailed, Refusal
from .options import device_specs


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


@click.command(name="bench")
@click.option("--device", "device_specs", metavar="SPEC", multiple=True,
              callback=device_specs,
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
@click.option("--processes", is_flag=True,
              help="Also run each team's yardstick: its devices' pinned->pinned jobs, one "
                   "process a device, all at once (what the host gives that many "
                   "independent jobs).")
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
def bench_command(device_specs, modes, key_bits, sizes, quick, min_time, no_host, processes,
                  as_json, plot_path, load_path, tune, quiet) -> None:
    """Measure throughput on each device and on the host, in GB/s.

    Four figures per device, mode, key size and input size: kernel (OpenCL
    event profiling, data in device memory), resident (enqueue to completion,
    data in device memory, separate output buffer), host->host (one library
    call on host memory, both transfers included) and pinned->pinned (the same
    with page-locked input and output). Host baselines run the same
    work on one CPU thread; every device's output is checked against theirs.
    Also reports cold and warm kernel build times and pinned transfer rates.
    A team (the GPUs, when there are several; all) gets host->host, pinned->pinned
    and bytes->bytes rows, a kernel row (its devices at once, each on data in its
    own memory) and, with --processes, its N-process yardstick.
    Exit status 1 if any output differs from the reference.
    """
    if plot_path:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise Refusal("--plot needs matplotlib: pip install 'aescl[plot]'") from None
        folder = os.path.dirname(os.path.abspath(plot_path))
        if not os.path.isdir(folder):  # (refused now, not after the whole benchmark)
            raise Refusal(f"--plot {plot_path}: the directory {folder} does not exist")
    if tune and load_path is not None:
        raise Refusal("--tune measures; --load only prints a saved report")
    if tune and not engines.tuning_enabled():
        raise Refusal("--tune would be ignored: AESCL_TUNE=0 keeps the default launch settings")
    if load_path is not None:
        try:
            report = benchreport.Report.from_dict(json.load(load_path))
        except (ValueError, KeyError, TypeError) as exc:
            raise Refusal(f"{load_path.name} is not an aescl bench --json report ({exc})") from None
    else:
        try:
            report = _run_bench(device_specs, modes, key_bits, sizes, quick, min_time,
                                no_host, processes, tune, quiet)
        except aescl.DeviceUnavailable as exc:  # (a driver's refusal: one line, as a job's)
            raise JobFailed(str(exc).splitlines()[0], EXIT_FAILED) from None
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else benchreport.table(report),
               nl=not as_json)
    if plot_path:
        try:
            benchreport.save_plot(report, plot_path)
        except OSError as exc:
            raise JobFailed(f"cannot write the plot {plot_path}: {exc.strerror or exc}",
                            EXIT_FAILED) from None
    if report.mismatches:
        raise JobFailed("output differs from the reference: " + "; ".join(report.mismatches),
                         EXIT_FAILED)


def _run_bench(device_specs, modes, key_bits, sizes, quick, min_time, no_host, processes,
               tune, quiet) -> benchreport.Report:
    from aescl import bench  # numpy and OpenCL: only when measuring

    base = benchreport.QUICK if quick else benchreport.Settings()
    try:
        settings = benchreport.Settings(
            modes=tuple(modes) or base.modes,
            key_bits=tuple(int(b) for b in key_bits) or base.key_bits,
            sizes=sizes or base.sizes,
            min_seconds=base.min_seconds if min_time is None else min_time,
            host_baselines=not no_host,
            processes=processes,
        )
    except ValueError as exc:
        raise Refusal(str(exc)) from None
    if not settings.configurations():
        raise Refusal("nothing to bench: gcm-chunked runs with --key-bits 256 only")
    chosen = _bench_devices(device_specs)
    progress = _BenchProgress(quiet)
    try:
        for device in chosen if tune else ():
            engines.engine_for(device).retune(progress)
        return bench.run(chosen, settings, progress=progress)
    finally:
        progress.close()


def _bench_devices(specs: tuple[str, ...]) -> list[aescl.Device]:
    found = aescl.list_devices()
    if not found:
        raise JobFailed(NO_PLATFORM_HINT, EXIT_FAILED)
    chosen: list[aescl.Device] = []
    for spec in specs or ("all",):
        if spec.strip().lower() == "all":
            matches = [d for d in found if not d.is_simulator]
        else:
            matches = [d for d in found if device_matches(d, spec)]
        if not matches:
            raise Refusal(f"no device matches {spec!r}; see `aescl devices`")
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
