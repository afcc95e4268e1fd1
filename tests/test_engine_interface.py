"""aescl/engines/interface.py: how a GPU engine's pipeline cuts the ranges it pulls into
pieces (``piece_cuts``). The engines' own tests run every mode through these pieces
on real devices (tests/test_pipeline.py, tests/test_engine_cuda_engine.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aescl.engines.interface import piece_cuts


def _ranges(bounds: list[int]) -> list[tuple[int, int]]:
    edges = sorted(set(bounds))
    return list(zip(edges, edges[1:], strict=False))


@given(st.lists(st.integers(0, 5000), min_size=2, max_size=12), st.integers(1, 700))
def test_pieces_cut_each_range_end_to_end_in_order_and_never_exceed_a_step(bounds, step):
    ranges = _ranges(bounds)
    pieces = list(piece_cuts(iter(ranges), step))
    assert all(0 < hi - lo <= step for lo, hi in pieces)
    at = 0
    for lo, hi in ranges:  # each range is its own pieces, end to end
        while lo < hi:
            assert pieces[at][0] == lo
            lo = pieces[at][1]
            at += 1
        assert lo == hi
    assert at == len(pieces)


def test_a_run_starts_and_ends_with_small_pieces_and_is_whole_steps_between():
    step = 2048
    sizes = [hi - lo for lo, hi in piece_cuts(iter([(0, 64 * step)]), step)]
    assert sizes[:4] == [step // 8, step // 4, step // 2, step]  # the first upload is short
    assert sizes[-1] <= step // 8 and sizes[-2] <= step // 8  # and so is the last download
    assert sizes[-5:] == sorted(sizes[-5:], reverse=True)
    assert sizes.count(step) >= 60


def test_ranges_are_pulled_only_as_pieces_are_asked_for():
    pulled = []

    def ranges():
        for r in [(0, 100), (100, 200), (200, 300)]:
            pulled.append(r)
            yield r

    pieces = piece_cuts(ranges(), 1000)
    assert next(pieces) == (0, 100) and pulled == [(0, 100)]
    assert next(pieces) == (100, 200) and pulled == [(0, 100), (100, 200)]
