"""What ``aescl bench`` measures and how it shows it: settings, the report, its text
table and plot. No numpy or OpenCL here, so that the CLI's options and ``bench
--load`` need neither; the measuring is in :mod:`aescl.bench`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

MODES = ("ctr", "ecb-encrypt", "ecb-decrypt", "gcm-chunked")
KEY_BITS = (128, 192, 256)
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
DEFAULT_SIZES = (16 * KiB, 256 * KiB, 4 * MiB, 64 * MiB, 1 * GiB)
QUICK_SIZES = (16 * KiB, 1 * MiB, 16 * MiB)
MEASURES = ("kernel", "resident", "host", "pinned")
MEASURE_LABELS = {"kernel": "kernel", "resident": "resident", "host": "host->host",
                  "pinned": "pinned->pinned"}


@dataclass(frozen=True)
class Settings:
    """What to measure, and how long to keep measuring each figure."""

    modes: tuple[str, ...] = MODES
    key_bits: tuple[int, ...] = KEY_BITS
    sizes: tuple[int, ...] = DEFAULT_SIZES
    min_seconds: float = 0.2  # per figure, after a warm-up run; at least 3 runs
    host_baselines: bool = True

    def __post_init__(self) -> None:
        for mode in self.modes:
            if mode not in MODES:
                raise ValueError(f"unknown mode {mode!r}: choose from {', '.join(MODES)}")
        for bits in self.key_bits:
            if bits not in KEY_BITS:
                raise ValueError(f"key size must be 128, 192 or 256 bits, not {bits}")
        for size in self.sizes:
            if size < 16 or size % 16:
                raise ValueError(f"sizes must be positive multiples of 16 bytes, not {size}")

    def configurations(self) -> list[tuple[str, int]]:
        """(mode, key bits) pairs; the chunked format is AES-256 only."""
        return [(mode, bits) for mode in self.modes for bits in self.key_bits
                if mode != "gcm-chunked" or bits == 256]


QUICK = Settings(sizes=QUICK_SIZES, min_seconds=0.02)


@dataclass
class Result:
    mode: str
    key_bits: int
    bytes: int
    kernel_gb_s: float | None
    resident_gb_s: float | None
    host_gb_s: float | None
    verified: bool | None  # output equal to the reference; None when there was none
    pinned_gb_s: float | None = None  # host->host with input and output in pinned memory
    # A job split over several devices: each device's fraction of the work (last run).
    shares: dict[str, float] | None = None

    def figure(self, measure: str) -> float | None:
        return getattr(self, f"{measure}_gb_s")


@dataclass
class Target:
    """One device, or one host baseline, and its results."""

    id: str
    name: str
    backend: str  # "opencl", "pycryptodome" or "openssl"
    type: str  # the device type, or "host"
    driver: str | None = None
    max_bytes: int | None = None
    build: dict[str, Any] | None = None
    transfer: dict[str, Any] | None = None
    results: list[Result] = field(default_factory=list)
    launch: dict[str, Any] | None = None  # tuning.describe: the settings used


@dataclass
class Report:
    aescl_version: str
    date: str
    host: dict[str, Any]
    settings: dict[str, Any]
    targets: list[Target]

    @property
    def mismatches(self) -> list[str]:
        """Every (target, mode, key, size) whose output differed from the reference."""
        return [f"{t.name}: {r.mode} AES-{r.key_bits} {format_size(r.bytes)}"
                for t in self.targets for r in t.results if r.verified is False]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        """A report as ``to_dict`` (``aescl bench --json``) wrote it, to print or plot again."""
        targets = [Target(**{**t, "results": [Result(**r) for r in t["results"]]})
                   for t in data["targets"]]
        return cls(**{**data, "targets": targets})


def format_size(nbytes: int) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def parse_size(text: str) -> int:
    """``16K``, ``4M``, ``1G`` (binary units) or plain bytes."""
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    scale = {"K": KiB, "M": MiB, "G": GiB}.get(text[-1:], 1)
    number = text[:-1] if scale > 1 else text
    if not number.isdigit():
        raise ValueError(f"not a size: {text!r} (use e.g. 16K, 4M, 1G)")
    return int(number) * scale


def _launch_line(launch: dict[str, Any]) -> str:
    copies = launch["table_lanes"]
    line = (f"launch: work-groups of {launch['work_group_size']}, at most "
            f"{launch['max_work_groups']}, {copies} table cop{'y' if copies == 1 else 'ies'}")
    tuned = launch["tuned"]
    if tuned is None:
        return line + " (defaults)"
    default = tuned["default_gb_s"]
    return line + (f" (tuned {tuned['date'][:10]} over {tuned['trials']} settings: AES-128 CTR "
                   f"{tuned['gb_s']:.1f} GB/s, defaults "
                   + ("n/a" if default is None else f"{default:.1f}") + ")")


def table(report: Report) -> str:
    """The report as text: one block per target, sizes across, GB/s in the cells."""
    sizes = report.settings["sizes"]
    lines: list[str] = []
    for target in report.targets:
        title = f"{target.id} {target.name}"
        if target.backend == "opencl":
            title += f" ({target.type}, driver {target.driver})"
        lines.append(title)
        if target.build:
            warm = target.build["warm_s"]
            lines.append(f"  kernel build, {target.build['kernel']}: cold "
                         f"{target.build['cold_s']:.3f} s, warm "
                         + ("n/a" if warm is None else f"{warm:.3f} s"))
        if target.launch:
            lines.append("  " + _launch_line(target.launch))
        if target.transfer:
            t = target.transfer
            lines.append(f"  pinned transfers of {format_size(t['bytes'])}: host->device "
                         f"{t['pinned_h2d_gb_s']:.1f} GB/s, device->host "
                         f"{t['pinned_d2h_gb_s']:.1f} GB/s")
        measures = {"opencl": MEASURES, "scheduler": ("host", "pinned")}.get(
            target.backend, ("host",))
        rows = [("GB/s", "", "", *[format_size(s) for s in sizes])]
        for mode, bits in sorted({(r.mode, r.key_bits) for r in target.results},
                                 key=lambda k: (MODES.index(k[0]), k[1])):
            by_size = {r.bytes: r for r in target.results
                       if (r.mode, r.key_bits) == (mode, bits)}
            for index, measure in enumerate(measures):
                cells = []
                for size in sizes:
                    result = by_size.get(size)
                    value = None if result is None else result.figure(measure)
                    mark = "!" if result is not None and result.verified is False else ""
                    cells.append("-" if value is None else f"{value:.2f}{mark}")
                rows.append((mode if index == 0 else "", f"AES-{bits}" if index == 0 else "",
                             MEASURE_LABELS[measure], *cells))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            cells = [cell.ljust(w) if i < 3 else cell.rjust(w)
                     for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
            lines.append("  " + "  ".join(cells).rstrip())
        for result in target.results:
            if result.shares:
                parts = ", ".join(f"{device} {100 * part:.0f}%"
                                  for device, part in result.shares.items())
                lines.append(f"  shares, {result.mode} AES-{result.key_bits} "
                             f"{format_size(result.bytes)}: {parts}")
        if target.max_bytes is not None and max(sizes) > target.max_bytes:
            lines.append(f"  (sizes above {target.max_bytes / MiB:.0f} MiB skipped: "
                         "device or host memory)")
        lines.append("")
    if report.mismatches:
        lines.append("OUTPUT MISMATCH (marked !): " + "; ".join(report.mismatches))
    return "\n".join(lines).rstrip() + "\n"


def save_plot(report: Report, path: str) -> None:
    """Throughput against size: one row of panels per target, one panel per measure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    targets = [t for t in report.targets if t.results]
    figure, axes = plt.subplots(len(targets), len(MEASURES), squeeze=False,
                                figsize=(5 * len(MEASURES), 3.6 * len(targets)))
    for row, target in zip(axes, targets, strict=True):
        for ax, measure in zip(row, MEASURES, strict=True):
            ax.set_title(f"{target.name}\n{MEASURE_LABELS[measure]}", fontsize=9)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("input bytes")
            ax.set_ylabel("GB/s")
            for mode, bits in sorted({(r.mode, r.key_bits) for r in target.results}):
                points = sorted((r.bytes, r.figure(measure)) for r in target.results
                                if (r.mode, r.key_bits) == (mode, bits)
                                and r.figure(measure) is not None)
                if points:
                    ax.plot(*zip(*points, strict=True), marker="o", label=f"{mode} AES-{bits}")
            if ax.lines:
                ax.legend(fontsize=7)
            else:
                ax.set_visible(False)
    figure.suptitle(f"aescl bench {report.date}", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)
