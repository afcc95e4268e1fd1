"""Explanations of the OpenCL setup for ``aescl devices --verbose``: what was found, what is
wrong, and how to fix it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ._cache import disk_cache_enabled, kernel_cache_dir
from ._icd import IcdReport
from .devices import NO_PLATFORM_HINT, Device, icd_report
from .engines.registry import list_devices


@dataclass(frozen=True)
class Finding:
    """One line of diagnosis: ``level`` is ``info``, ``note`` or ``problem``."""

    level: str
    message: str
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"level": self.level, "message": self.message, "fix": self.fix}


def diagnose(report: IcdReport | None = None, found: list[Device] | None = None) -> list[Finding]:
    """Everything ``aescl devices --verbose`` reports, in reading order.

    ``report`` and ``found`` default to this process's ICD report and devices.
    """
    report = report if report is not None else icd_report()
    found = found if found is not None else list_devices()
    findings = [Finding("info", f"ICD vendors directory: {report.vendors_dir} "
                                f"({len(report.icd_files)} .icd files)")]
    findings += [Finding("info", f"  {f.path.name} -> {f.library}") for f in report.icd_files]
    for vendor, library in report.unregistered.items():
        if report.private_dir is not None:
            findings.append(Finding(
                "note",
                f"the {vendor} OpenCL driver {library} has no .icd file; aescl registered it "
                f"for its own process through {report.private_dir}",
                f"to make it visible to every OpenCL program, put its path in "
                f"{report.vendors_dir}/{vendor}.icd",
            ))
        else:
            findings.append(Finding(
                "problem", f"the {vendor} OpenCL driver {library} has no .icd file and aescl "
                "could not register it (the cache directory is not writable)",
                f"put its path in {report.vendors_dir}/{vendor}.icd",
            ))
    platforms = Counter(d.platform_name for d in found)
    for name, count in platforms.items():
        findings.append(Finding("info", f"platform {name}: {count} device(s)"))
    if not found:
        findings.append(Finding("problem", "no OpenCL platform", NO_PLATFORM_HINT))
    elif all(d.is_simulator for d in found):
        findings.append(Finding(
            "problem", "only the Oclgrind simulator is available; nothing runs at real speed",
            "install a CPU runtime (apt-get install pocl-opencl-icd, or pip install "
            "'aescl[pocl]') or a GPU driver",
        ))
    pocl_platforms = [d for d in found if d.vendor == "pocl" and d.type == "cpu"]
    if len({d.platform_version for d in pocl_platforms}) > 1:
        findings.append(Finding(
            "note", "more than one PoCL CPU runtime is installed; `pocl` picks one of them",
            "choose one by id (aescl devices), or uninstall pocl-binary-distribution",
        ))
    cache = kernel_cache_dir()
    cached = len(list(cache.glob("*.bin"))) if cache.is_dir() else 0
    state = "on" if disk_cache_enabled() else "off (AESCL_NO_CACHE)"
    findings.append(Finding("info", f"kernel cache: {cache} ({state}, {cached} programs)"))
    return findings
