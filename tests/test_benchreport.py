"""aescl/benchreport.py: the closing summary and the plot, on reports made here (no OpenCL)."""

from __future__ import annotations

import pytest

from aescl.benchreport import MiB, Report, Result, Target, fastest, plot, table

SIZES = [1 * MiB, 64 * MiB]


def _result(mode, bits, size, host, kernel=None, pinned=None, verified=True):
    return Result(mode, bits, size, kernel, None if kernel is None else kernel / 2, host,
                  verified, pinned)


def _report() -> Report:
    gpu = Target("0:0", "A GPU", "opencl", "gpu", results=[
        _result("ctr", 128, SIZES[0], 1.0, kernel=100.0, pinned=2.0),
        _result("ctr", 128, SIZES[1], 9.0, kernel=500.0, pinned=30.0),
        _result("gcm-chunked", 256, SIZES[0], 0.5, kernel=50.0),
        # A wrong output is never "fastest", however quick.
        _result("gcm-chunked", 256, SIZES[1], 99.0, kernel=999.0, verified=False),
    ])
    host = Target("host", "the CPU (2 threads, OpenSSL)", "host-engine", "host", results=[
        _result("ctr", 128, SIZES[0], 3.0),
        _result("ctr", 128, SIZES[1], 6.0),
        _result("gcm-chunked", 256, SIZES[0], 0.4),
        _result("gcm-chunked", 256, SIZES[1], 2.0),
    ])
    # The one-thread yardsticks are faster here on purpose: they cannot be chosen.
    baseline = Target("openssl", "OpenSSL (1 thread)", "openssl", "host", results=[
        _result("ctr", 128, size, 50.0, verified=None) for size in SIZES])
    return Report("0", "2026-11-23T00:00:00", {}, {"sizes": SIZES}, [gpu, host, baseline])


def test_the_summary_names_the_fastest_choosable_device_at_each_size():
    lines = fastest(_report())
    assert lines[0].startswith("fastest device per mode")
    ctr = next(line for line in lines if line.split()[:2] == ["ctr", "AES-128"])
    assert ctr.split()[2:] == ["host", "3.00", "0:0", "9.00", "0:0", "500.0"]
    gcm = next(line for line in lines if line.split()[:1] == ["gcm-chunked"])
    assert gcm.split()[2:] == ["0:0", "0.50", "host", "2.00", "0:0", "50.0"]


def test_the_text_report_ends_with_the_summary_then_any_mismatch():
    lines = table(_report()).rstrip().splitlines()
    assert lines[-1].startswith("OUTPUT MISMATCH")
    assert lines[-2].split()[0] == "gcm-chunked"
    assert lines.index(fastest(_report())[0]) > lines.index("openssl OpenSSL (1 thread)")


def test_the_plot_has_one_panel_per_mode_and_key_with_every_device_in_it():
    pytest.importorskip("matplotlib")
    figure = plot(_report())
    panels = [ax for ax in figure.axes if ax.get_visible()]
    assert sorted(ax.get_title() for ax in panels) == ["ctr AES-128", "gcm-chunked AES-256"]
    ctr = next(ax for ax in panels if ax.get_title() == "ctr AES-128")
    # GPU: kernel, host->host, pinned; host engine and baseline: host->host.
    styles = sorted((line.get_color(), line.get_linestyle()) for line in ctr.lines)
    assert len(styles) == 5 and len({style for style in styles}) == 5
    gpu_colour = {line.get_color() for line in ctr.lines if line.get_linestyle() == "-"}
    assert len(gpu_colour) == 1
    gcm = next(ax for ax in panels if ax.get_title() == "gcm-chunked AES-256")
    assert gpu_colour <= {line.get_color() for line in gcm.lines}
    labels = [text.get_text() for legend in figure.legends for text in legend.get_texts()]
    assert {"0:0: A GPU", "kernel", "host->host", "pinned->pinned"} <= set(labels)


def test_a_slow_rate_is_never_printed_as_zero():
    """16 KiB host->host through a GPU that eight test workers share took a few ms: the
    table said 0.00 GB/s for a rate that was measured (an H200, 2026-11-27)."""
    slow = Target("0:0", "A GPU", "opencl", "gpu", results=[
        _result("ctr", 128, 16 * 1024, 0.00412, kernel=0.0009, pinned=0.5)])
    report = Report("0", "2026-11-27T00:00:00", {}, {"sizes": [16 * 1024]}, [slow])
    text = table(report)
    rows = [line.split() for line in text[: text.index("fastest")].splitlines()]
    figures = {row[-2]: row[-1] for row in rows if len(row) > 1}
    assert figures["kernel"] == "0.0009" and figures["host->host"] == "0.00412"
    assert figures["pinned->pinned"] == "0.50"
    assert fastest(report)[-1].split()[2:] == ["0:0", "0.00412", "0:0", "0.0009"]


def test_the_plain_call_has_its_row_and_old_reports_still_load():
    """bytes->bytes (a plain call: bytes in, a new bytes result) beside host->host (which
    passes output=); a report saved before that figure existed loads and prints a dash."""
    gpu = Target("0:0", "A GPU", "opencl", "gpu", results=[
        Result("ctr", 128, MiB, 100.0, 50.0, 9.0, True, 30.0, None, 2.5)])
    host = Target("host", "the CPU", "host-engine", "host", results=[
        Result("ctr", 128, MiB, None, None, 6.0, True, 7.0, None, 1.5)])
    report = Report("0", "2026-11-27T00:00:00", {}, {"sizes": [MiB]}, [gpu, host])
    text = table(report)
    rows = [line.split() for line in text[: text.index("fastest")].splitlines()]
    assert [row[-1] for row in rows if row[-2:-1] == ["bytes->bytes"]] == ["2.50", "1.50"]
    saved = report.to_dict()
    for target in saved["targets"]:
        for result in target["results"]:
            del result["bytes_gb_s"]
    again = Report.from_dict(saved)
    assert again.targets[0].results[0].bytes_gb_s is None
    old = table(again)
    assert [line.split()[-1] for line in old.splitlines() if "bytes->bytes" in line] == ["-", "-"]
