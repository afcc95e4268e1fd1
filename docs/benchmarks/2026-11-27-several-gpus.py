"""Issue 57 (item 6): the plot of one job over 1, 2 and 4 GPUs, both engines, beside the
N-process yardstick, from the figures the runs recorded
(``2026-11-27-several-gpus.json``: each run's host, commit and section of
docs/benchmarks/README.md). Draws ``2026-11-27-several-gpus.png`` beside it.

    python3 docs/benchmarks/2026-11-27-several-gpus.py
"""

from __future__ import annotations

import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = pathlib.Path(__file__).parent
STYLES = {"cuda": ("tab:green", "o"), "opencl": ("tab:blue", "s"), "all": ("tab:purple", "^")}


def main() -> None:
    figures = json.loads((HERE / "2026-11-27-several-gpus.json").read_text())
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained", sharey=True)
    for panel, (ax, title) in enumerate(zip(axes, ("CTR-128", "chunked format (AES-256)"),
                                            strict=True)):
        for run_index, run in enumerate(figures["runs"]):
            dashes = ("-", "--", ":", "-.", (0, (6, 2, 1, 2, 1, 2)))[run_index]
            for engine, (colour, marker) in STYLES.items():
                points = sorted((int(gpus), rates[engine][panel])
                                for gpus, rates in run["gpus"].items() if engine in rates)
                if points:
                    ax.plot(*zip(*points, strict=True), linestyle=dashes, marker=marker,
                            color=colour, label=f"{engine}, {run['commit']}")
            if panel == 0:
                for engine, total in run["yardstick"].items():
                    gpus = max(int(g) for g in run["gpus"])
                    ax.scatter([gpus], [total], marker="*", s=120, color=STYLES[engine][0],
                               edgecolors="black",
                               label=f"{gpus} processes, {engine}, {run['commit']}")
        ax.set_title(title, fontsize=10)
        ax.set_xticks([1, 2, 4])
        ax.set_xlabel("GPUs in the job (H200)")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("GB/s, pinned memory")
    axes[0].legend(fontsize=7, ncol=2)
    figure.suptitle("One job over several GPUs, against N processes at once (stars): "
                    "lines are runs (solid 2 x H200, the others 4 x H200; "
                    "819dfbe and c3fb7bf: a process a GPU)", fontsize=9)
    figure.savefig(HERE / "2026-11-27-several-gpus.png", dpi=90)


if __name__ == "__main__":
    main()
