"""One ECB or CTR call over memory on a device, split the way every engine's kernels need it.

The kernels (``cl/aes_ecb.cl``, ``cl/aes_ctr.cl``) take whole 16-byte blocks at
addresses the device can load a block from. A call on a caller's device array may
start or end inside a block (CTR continues its stream at any byte), and the array may
start anywhere in its allocation. :func:`run_blocks` splits such a call into:

* a partial first block: the rest of a block an earlier call began, run through a
  one-block scratch buffer at its place in the block;
* the whole blocks, in place in the caller's memory where it is aligned for the
  kernel, else through one scratch buffer (copied in, run, copied out);
* a partial last block, through the one-block scratch buffer.

Every step is device work on the caller's queue or stream, in order; no data byte
crosses to the host. The engines supply the memory operations (:class:`DeviceMemory`)
over their own spans of memory (anything with ``nbytes`` and ``at(offset, nbytes)``).
"""

from __future__ import annotations

from typing import Any, Protocol

from ..interface import BLOCK_SIZE


class DeviceMemory(Protocol):
    """What :func:`run_blocks` asks of an engine, for one call on one queue or stream.
    Each operation is enqueued after the one before it."""

    def aligned(self, span: Any) -> bool:
        """Whether the kernel can take ``span`` where it lies."""

    def launch(self, source: Any, target: Any, blocks: int, first_block: int) -> None:
        """The kernel over ``blocks`` blocks of ``source`` into ``target`` (aligned spans,
        possibly the same), as blocks ``first_block, ...`` of the job."""

    def scratch(self, nbytes: int) -> Any:
        """A new span of ``nbytes`` on the device, zero-filled."""

    def copy(self, target: Any, source: Any) -> None:
        """``source``'s bytes into ``target`` (spans of the same length)."""

    def release(self, span: Any) -> None:
        """A scratch span is no longer needed (once the work before this is done)."""


def run_blocks(memory: DeviceMemory, source: Any, target: Any, first_block: int,
               skip: int = 0) -> None:
    """``source`` through the kernel into ``target`` (spans of the same length; may be the
    same memory). The data starts ``skip`` bytes into block ``first_block`` of the job
    (CTR; ECB calls are whole blocks from ``skip`` 0)."""
    done, length = 0, source.nbytes
    if skip and length:  # the rest of a block an earlier call began
        done = min(length, BLOCK_SIZE - skip)
        _through_scratch(memory, source.at(0, done), target.at(0, done), first_block, skip)
        first_block += 1
    whole = (length - done) // BLOCK_SIZE * BLOCK_SIZE
    if whole:
        src, dst = source.at(done, whole), target.at(done, whole)
        if memory.aligned(src) and memory.aligned(dst):
            memory.launch(src, dst, whole // BLOCK_SIZE, first_block)
        else:
            scratch = memory.scratch(whole)
            memory.copy(scratch, src)
            memory.launch(scratch, scratch, whole // BLOCK_SIZE, first_block)
            memory.copy(dst, scratch)
            memory.release(scratch)
        first_block += whole // BLOCK_SIZE
        done += whole
    if done < length:  # a partial last block
        _through_scratch(memory, source.at(done, length - done),
                         target.at(done, length - done), first_block, 0)


def _through_scratch(memory: DeviceMemory, source: Any, target: Any, block: int,
                     skip: int) -> None:
    """Less than a block, ``skip`` bytes into block ``block``: placed at its offset in a
    zeroed one-block buffer, run, and copied back out."""
    scratch = memory.scratch(BLOCK_SIZE)
    memory.copy(scratch.at(skip, source.nbytes), source)
    memory.launch(scratch, scratch, 1, block)
    memory.copy(target, scratch.at(skip, source.nbytes))
    memory.release(scratch)
