"""aescl/engines/programs/device_chunks.py: how many work-items each message of a
fused-kernel launch gets (message_items). The bytes each choice gives are checked on
real devices in test_kernel_chunk_seal.py and test_kernel_gcm.py."""

from __future__ import annotations

from aescl.engines.programs.device_chunks import (
    MESSAGE_ITEMS_ALONE,
    MESSAGE_ITEMS_MOST,
    message_items,
)

# An H200's CUDA build of the fused kernel: blocks of 1,024 threads, 264 at once.
H200_GROUP, H200_WAVE = 1024, 264


def test_a_run_that_fills_a_wave_keeps_the_fewest_items_a_message():
    assert message_items(65536, 8, H200_GROUP, H200_WAVE) == 8  # 1 GiB of chunks
    assert message_items(40000, 8, H200_GROUP, H200_WAVE) == 8


def test_a_short_run_spreads_each_message_over_more_items():
    # 256 chunks (4 MiB): fewer than the wave's blocks, so up to a message alone's items
    assert message_items(256, 8, H200_GROUP, H200_WAVE) == MESSAGE_ITEMS_ALONE
    # 4,096 chunks (64 MiB): more than the wave's blocks, short of its threads
    assert message_items(4096, 8, H200_GROUP, H200_WAVE) == MESSAGE_ITEMS_MOST
    # 20,000 chunks: 16 items each fill the wave
    assert message_items(20000, 8, H200_GROUP, H200_WAVE) == 16


def test_items_a_message_are_a_power_of_two_that_divides_the_group_and_fill_no_more():
    for group in (16, 64, 96, 256, 1024):
        for wave in (1, 3, 8, 264):
            for count in range(1, 700):
                items = message_items(count, 8, group, wave)
                assert items & (items - 1) == 0 and group % items == 0
                assert 8 <= items <= max(8, min(group, MESSAGE_ITEMS_ALONE))
                if count >= wave:
                    assert items <= MESSAGE_ITEMS_MOST
                if items > 8:  # (doubled only while the wave was not full)
                    assert count * (items // 2) < wave * group


def test_a_build_with_more_items_than_the_rule_keeps_them():
    assert message_items(3, 256, 256, 1) == 256
    assert message_items(1, 8, 8, 4) == 8  # (a group of 8 cannot take more)
