"""``aescl devices``: what OpenCL sees, the GPUs of the CUDA engine, and the host engine."""

from __future__ import annotations

import json
import os
import sys

import click

import aescl
from aescl.devices import NO_PLATFORM_HINT, icd_report


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:.1f} GiB"


def _kib(nbytes: int) -> str:
    return f"{nbytes // 1024} KiB"


def _device_rows(found: list[aescl.Device]) -> list[tuple[str, ...]]:
    header = ("ID", "TYPE", "VENDOR", "NAME", "CUS", "CLOCK", "MEMORY", "LOCAL",
              "MAX ALLOC", "PCIE", "OPENCL C", "DRIVER")
    rows = [header]
    for d in found:
        rows.append((
            d.id, d.type, d.vendor, d.name, str(d.compute_units), f"{d.clock_mhz} MHz",
            _gib(d.global_mem_bytes), _kib(d.local_mem_bytes), _gib(d.max_alloc_bytes),
            "" if d.pcie_gb_s is None else f"{d.pcie_gb_s:.1f} GB/s",
            d.opencl_c_version.replace("OpenCL C ", "") or
            (f"CUDA {d.platform_version}" if d.is_cuda else ""), d.driver_version,
        ))
    return rows


def _print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        click.echo("  ".join(cells).rstrip())


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the devices as JSON.")
@click.option("--verbose", "-v", is_flag=True,
              help="Also explain the OpenCL setup: ICD files, drivers aescl registered, "
                   "problems and their fixes, and the kernel cache.")
def devices(as_json: bool, verbose: bool) -> None:
    """List OpenCL platforms and devices (simulators included), the GPUs of the CUDA
    engine (``cuda:N``, with aescl[cuda]), then the host engine."""
    from aescl.diagnostics import diagnose

    found = aescl.list_devices()
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
    if not any(d.type != "host" for d in found):  # the host engine still works
        click.echo(f"aescl: {NO_PLATFORM_HINT}; until then the host engine (host) runs "
                   "every job", err=True)
        sys.exit(1)


def _warn_of_default_spec() -> None:
    """Say so when $AESCL_DEVICE names no device: every job without --device would fail."""
    spec = os.environ.get("AESCL_DEVICE")
    if not spec:
        return
    try:
        aescl.teams.resolve_devices(spec)
    except aescl.DeviceNotFound as exc:
        click.echo(f"aescl: warning: AESCL_DEVICE={spec!r} names no device, so jobs "
                   f"without --device fail: {str(exc).splitlines()[0]}", err=True)
