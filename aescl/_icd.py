"""Find OpenCL drivers that are installed but not registered, and register them.

An OpenCL ICD loader only sees drivers named by ``.icd`` files in its vendors
directory (``/etc/OpenCL/vendors``). Container images often carry the NVIDIA
driver's ``libnvidia-opencl.so.1`` (mounted in by the container runtime) without
that file, so OpenCL reports no NVIDIA platform although the GPU works. The same
happens with AMD's ``libamdocl64.so``.

Before the first platform query, aescl looks for those libraries in the usual
driver locations. If one is present and unregistered, it writes a private
vendors directory that holds copies of the system's ``.icd`` files plus one for
each library found, and points ``OCL_ICD_VENDORS`` at it for this process only.
Both ICD loaders in use (Khronos and ocl-icd, which pyopencl's wheels bundle)
read that variable at their first query, so this must run before anything in
the process asks OpenCL for platforms.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

SYSTEM_VENDORS_DIR = "etc/OpenCL/vendors"

# Vendor -> (library file name, directories to search, relative to the root).
KNOWN_DRIVERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "nvidia": (
        "libnvidia-opencl.so.1",
        (
            "usr/lib/x86_64-linux-gnu",
            "usr/lib/aarch64-linux-gnu",
            "usr/lib64",
            "usr/lib",
            "usr/local/nvidia/lib64",
            "usr/local/nvidia/lib",
            "usr/lib/nvidia",
            "usr/lib/wsl/lib",
        ),
    ),
    "amd": (
        "libamdocl64.so",
        (
            "opt/rocm/lib",
            "opt/rocm/opencl/lib",
            "opt/amdgpu-pro/lib/x86_64-linux-gnu",
            "opt/amdgpu/lib/x86_64-linux-gnu",
            "usr/lib/x86_64-linux-gnu",
            "usr/lib64",
        ),
    ),
}


@dataclass(frozen=True)
class IcdFile:
    """One ``.icd`` file: its path and the library it names."""

    path: Path
    library: str


@dataclass(frozen=True)
class IcdReport:
    """What discovery found, and what (if anything) aescl registered."""

    vendors_dir: Path
    icd_files: tuple[IcdFile, ...]
    unregistered: dict[str, Path] = field(default_factory=dict)
    private_dir: Path | None = None

    @property
    def registered_by_aescl(self) -> dict[str, Path]:
        """Libraries aescl registered itself (empty when nothing was missing)."""
        return dict(self.unregistered) if self.private_dir is not None else {}


def _read_icd_files(vendors_dir: Path) -> tuple[IcdFile, ...]:
    if not vendors_dir.is_dir():
        return ()
    entries = []
    for path in sorted(vendors_dir.glob("*.icd")):
        try:
            library = path.read_text().strip()
        except OSError:
            continue
        if library:
            entries.append(IcdFile(path, library))
    return tuple(entries)


def _is_registered(library_name: str, icd_files: tuple[IcdFile, ...]) -> bool:
    return any(Path(entry.library).name == library_name for entry in icd_files)


def _find_library(root: Path, name: str, directories: tuple[str, ...]) -> Path | None:
    for directory in directories:
        candidate = root / directory / name
        if candidate.is_file():
            return candidate
    return None


def default_vendors_dir(root: Path = Path("/")) -> Path:
    """The vendors directory the ICD loader reads: ``$OCL_ICD_VENDORS`` if set."""
    configured = os.environ.get("OCL_ICD_VENDORS")
    if configured and Path(configured).is_dir():
        return Path(configured)
    return root / SYSTEM_VENDORS_DIR


def discover(root: Path = Path("/"), vendors_dir: Path | None = None) -> IcdReport:
    """Read the registered ICDs and look for known drivers that lack one."""
    vendors_dir = vendors_dir if vendors_dir is not None else default_vendors_dir(root)
    icd_files = _read_icd_files(vendors_dir)
    unregistered = {}
    for vendor, (library_name, directories) in KNOWN_DRIVERS.items():
        if _is_registered(library_name, icd_files):
            continue
        found = _find_library(root, library_name, directories)
        if found is not None:
            unregistered[vendor] = found
    return IcdReport(vendors_dir, icd_files, unregistered)


def write_private_vendors_dir(report: IcdReport, parent: Path) -> Path:
    """Write a vendors directory with the system's entries plus the missing ones.

    The directory is named by a hash of its content, so every process with the
    same drivers shares one directory and nothing accumulates. Its entries name the
    libraries the ICD loader loads into this process: an existing directory is reused
    only where it is the user's own and holds exactly those entries
    (:func:`_holds_exactly`), and where ``parent`` is not the user's own
    (_cache.private_folder) a directory of this process's own is made in the temporary
    folder instead, and removed when the process ends.
    """
    from ._cache import private_folder

    contents = {entry.path.name: entry.library + "\n" for entry in report.icd_files}
    for vendor, library in report.unregistered.items():
        contents[f"aescl-{vendor}.icd"] = f"{library}\n"
    if private_folder(parent) is None:
        import atexit
        import shutil

        own = Path(tempfile.mkdtemp(prefix="aescl-vendors-"))
        _write_entries(own, contents)
        atexit.register(shutil.rmtree, own, ignore_errors=True)
        return own
    digest = hashlib.sha256(repr(sorted(contents.items())).encode()).hexdigest()[:16]
    target = parent / f"vendors-{digest}"
    if _holds_exactly(target, contents):
        return target
    staging = Path(tempfile.mkdtemp(prefix=".vendors-", dir=parent))  # (0700)
    _write_entries(staging, contents)
    try:
        staging.rename(target)
    except OSError:  # another process won the race, or a directory that is not ours
        if _holds_exactly(target, contents):
            for path in staging.iterdir():
                path.unlink()
            staging.rmdir()
            return target
        return staging  # (ours alone; left for the next run to find unused)
    return target


def _write_entries(folder: Path, contents: dict[str, str]) -> None:
    for name, text in contents.items():
        (folder / name).write_text(text)


def _holds_exactly(folder: Path, contents: dict[str, str]) -> bool:
    """Whether ``folder`` is the user's own and holds ``contents`` (file name -> text)
    and nothing else, each a regular file of the user's own."""
    from ._cache import read_cache_file

    try:
        if not folder.is_dir() or sorted(p.name for p in folder.iterdir()) != sorted(contents):
            return False
    except OSError:
        return False
    return all(read_cache_file(folder / name, 1 << 16) == text.encode()
               for name, text in contents.items())


def register_unregistered(report: IcdReport, parent: Path) -> IcdReport:
    """Register what discovery found missing, for this process; returns the new report."""
    if not report.unregistered:
        return report
    private_dir = write_private_vendors_dir(report, parent)
    os.environ["OCL_ICD_VENDORS"] = str(private_dir)
    return IcdReport(report.vendors_dir, report.icd_files, report.unregistered, private_dir)
