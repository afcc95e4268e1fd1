"""aescl/timing.py: the GB/s figures reports print."""

from __future__ import annotations

from aescl.timing import gb_s


def test_a_slow_figure_is_small_not_zero():
    assert gb_s(16384, 0.040) == 0.00041  # (16 KiB in 40 ms: three decimals would say 0.0)
    assert gb_s(10**9, 0.5) == 2.0 and gb_s(123456789, 1.0) == 0.123
    assert gb_s(1, 0) == float("inf")
