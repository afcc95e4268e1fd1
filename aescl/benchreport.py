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
DEVICE_MEASURES = ("kernel", "resident", "host", "pinned", "bytes")  # (each device's)
MEASURES = (*DEVICE_MEASURES, "processes")
MEASURE_LABELS = {"kernel": "kernel", "resident": "resident", "host": "host->host",
                  "pinned": "pinned->pinned", "bytes": "bytes->bytes",
                  "processes": "N processes"}


@dataclass(frozen=True)
class Settings:
    """What to measure, and how long to keep measuring each figure."""

    modes: tuple[str, ...] = MODES
    key_bits: tuple[int, ...] = KEY_BITS
    sizes: tuple[int, ...] = DEFAULT_SIZES
    min_seconds: float = 0.2  # per figure, after a warm-up run; at least 3 runs
    host_baselines: bool = True
    # A team's yardstick: its devices' pinned->pinned jobs in a process each, at once.
    processes: bool = False

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
    # The plain call: bytes in, a new bytes result out (no output=), as a user first
    # writes it. (Absent from reports saved before it was measured.)
    bytes_gb_s: float | None = None
    # A team (backend "scheduler"): its devices' pinned->pinned jobs, each in a process of
    # its own, all at once, summed (bench --processes): what the host gives N
    # independent jobs, beside which the team's pinned figure reads.
    processes_gb_s: float | None = None

    def figure(self, measure: str) -> float | None:
        return getattr(self, f"{measure}_gb_s")


@dataclass
class Target:
    """One device, or one host baseline, and its results."""

    id: str
    name: str
    # the engine: "opencl", "cuda", "host-engine", "scheduler" (a split), or a baseline:
    # "pycryptodome", "openssl"
    backend: str
    type: str  # the device type, or "host"
    driver: str | None = None
    max_bytes: int | None = None
    build: dict[str, Any] | None = None
    transfer: dict[str, Any] | None = None
    results: list[Result] = field(default_factory=list)
    launch: dict[str, Any] | None = None  # tuning.describe: the settings used
    # Seconds a fresh process spends on this device before its first block, over what
    # it spends on the host engine (OpenCL's start-up: what the default device weighs).
    start_s: float | None = None


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


def format_rate(gb_s: float, decimals: int = 2) -> str:
    """A rate in GB/s for a table: ``decimals`` places, or three significant digits where
    those would show none, so that a slow measurement (16 KiB through a busy GPU: a few
    MB/s) never reads 0.00."""
    return f"{gb_s:.{decimals}f}" if gb_s >= 10**-decimals or gb_s == 0 else f"{gb_s:.3g}"


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
    if launch.get("rounds"):  # (OpenCL devices: kernels.CORE_VARIANTS)
        line += f", {launch['rounds']} rounds"
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
        if target.backend in ("opencl", "cuda"):
            title += f" ({target.backend} {target.type}, driver {target.driver})"
        lines.append(title)
        if target.build:
            warm = target.build["warm_s"]
            lines.append(f"  kernel build, {target.build['kernel']}: cold "
                         f"{target.build['cold_s']:.3f} s, warm "
                         + ("n/a" if warm is None else f"{warm:.3f} s"))
        if target.start_s is not None:
            lines.append(f"  start-up in a fresh process, over the host engine's: "
                         f"{target.start_s:.3f} s")
        if target.launch:
            lines.append("  " + _launch_line(target.launch))
        if target.transfer:
            t = target.transfer
            lines.append(f"  pinned transfers of {format_size(t['bytes'])}: host->device "
                         f"{t['pinned_h2d_gb_s']:.1f} GB/s, device->host "
                         f"{t['pinned_d2h_gb_s']:.1f} GB/s")
        measures = {"opencl": DEVICE_MEASURES, "cuda": DEVICE_MEASURES,
                    "host-engine": ("host", "pinned", "bytes")}.get(
            target.backend, ("host",))
        if target.backend == "scheduler":  # (kernel and N processes: where measured)
            measures = tuple(m for m in ("kernel", "host", "pinned", "bytes", "processes")
                             if any(r.figure(m) is not None for r in target.results))
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
                    cells.append("-" if value is None else f"{format_rate(value)}{mark}")
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
    lines.extend(fastest(report))
    if report.mismatches:
        lines.append("OUTPUT MISMATCH (marked !): " + "; ".join(report.mismatches))
    return "\n".join(lines).rstrip() + "\n"


# The one-thread baselines are yardsticks, not something ``--device`` can choose.
_BASELINES = ("pycryptodome", "openssl")


def _best(report: Report, mode: str, bits: int, size: int | None, measure: str
          ) -> tuple[str, float] | None:
    """The choosable target with the highest ``measure`` (at ``size``, or at any size).
    A team's kernel figure is its devices' at once, each on data in its own memory: not
    what one array in device memory can have, so it never wins that."""
    figures = [(r.figure(measure), t.id) for t in report.targets if t.backend not in _BASELINES
               and not (measure == "kernel" and t.backend == "scheduler")
               for r in t.results
               if (r.mode, r.key_bits) == (mode, bits) and (size is None or r.bytes == size)
               and r.figure(measure) is not None and r.verified is not False]
    if not figures:
        return None
    value, target = max(figures)
    return target, value


def fastest(report: Report) -> list[str]:
    """The closing summary: for each mode and key size, the device to choose when the data
    is in host memory (best host->host at each size) and when it already sits in device
    memory (best kernel figure). Baselines and mismatched outputs never win."""
    sizes = report.settings["sizes"]
    configurations = sorted({(r.mode, r.key_bits) for t in report.targets for r in t.results
                             if t.backend not in _BASELINES},
                            key=lambda k: (MODES.index(k[0]), k[1]))
    if not configurations:
        return []
    rows = [("", "", *[format_size(s) for s in sizes], "in device memory")]
    for mode, bits in configurations:
        cells = []
        for size in sizes:
            best = _best(report, mode, bits, size, "host")
            cells.append("-" if best is None else f"{best[0]} {format_rate(best[1])}")
        on_device = _best(report, mode, bits, None, "kernel")
        cells.append("-" if on_device is None
                     else f"{on_device[0]} {format_rate(on_device[1], 1)}")
        rows.append((mode, f"AES-{bits}", *cells))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["fastest device per mode, GB/s (from host memory: host->host at each size; "
             "in device memory: best kernel figure)"]
    for row in rows:
        lines.append("  " + "  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w)
                                      in enumerate(zip(row, widths, strict=True))).rstrip())
    return lines


# How each measure is drawn in the plot; "resident" stays in the table (it tracks kernel).
_PLOT_STYLES = {"kernel": ("-", "o"), "host": ("--", "s"), "pinned": (":", "^"),
                "bytes": ("-.", "x"), "processes": ((0, (1, 3)), "d")}


def save_plot(report: Report, path: str) -> None:
    """Draw :func:`plot` to ``path`` (PNG)."""
    figure = plot(report)  # first: it chooses the Agg backend before pyplot loads
    import matplotlib.pyplot as plt

    figure.savefig(path, dpi=90)
    plt.close(figure)


def plot(report: Report) -> Any:
    """Throughput against size, one panel per mode and key size: a matplotlib Figure.
    Every target is one colour in every panel; the measure is the line style (kernel
    solid, host->host dashed, pinned->pinned dotted), so which device wins at which size
    reads off one panel, and a team (the GPUs, ``all``) is drawn beside its members,
    with its N-process yardstick where measured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    targets = [t for t in report.targets if t.results]
    configurations = sorted({(r.mode, r.key_bits) for t in targets for r in t.results},
                            key=lambda k: (MODES.index(k[0]), k[1]))
    columns = min(3, max(1, len(configurations)))
    rows = -(-len(configurations) // columns)
    figure, axes = plt.subplots(rows, columns, squeeze=False, layout="constrained",
                                figsize=(5.2 * columns, 3.8 * rows + 0.9))
    # By position, not id: reports saved before the host engine named both baselines "host".
    colours = [plt.get_cmap("tab10")(i % 10) for i in range(len(targets))]
    for ax, (mode, bits) in zip(axes.flat, configurations, strict=False):
        ax.set_title(f"{mode} AES-{bits}", fontsize=10)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        sizes = sorted({r.bytes for t in targets for r in t.results})
        ax.set_xticks(sizes, [format_size(s) for s in sizes], fontsize=8)
        ax.minorticks_off()
        ax.set_xlabel("input size")
        ax.set_ylabel("GB/s")
        ax.grid(True, which="major", alpha=0.3)
        for colour, target in zip(colours, targets, strict=True):
            for measure, (line, marker) in _PLOT_STYLES.items():
                points = sorted((r.bytes, r.figure(measure)) for r in target.results
                                if (r.mode, r.key_bits) == (mode, bits)
                                and r.figure(measure) is not None)
                if points:
                    ax.plot(*zip(*points, strict=True), linestyle=line, marker=marker,
                            markersize=4, color=colour)
    for ax in axes.flat[len(configurations):]:
        ax.set_visible(False)
    devices = [Line2D([], [], color=colour, linewidth=3, label=f"{t.id}: {t.name}")
               for colour, t in zip(colours, targets, strict=True)]
    measures = [Line2D([], [], color="black", linestyle=line, marker=marker,
                       label=MEASURE_LABELS[measure])
                for measure, (line, marker) in _PLOT_STYLES.items()]
    figure.legend(handles=devices + measures, loc="outside lower center", fontsize=8,
                  ncol=min(4, len(devices) + len(measures)), frameon=False)
    figure.suptitle(f"aescl bench {report.date[:10]}: throughput against input size "
                    "(colour: device, line: measure)", fontsize=10)
    return figure
