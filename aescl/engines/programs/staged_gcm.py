"""GCM on host data that a GPU engine stages through its device: the device-array GCM's
calls (device_gcm.DeviceGcm) with each call one pass over its text. Apart from
device_gcm.py, which ``import aescl`` loads (aescl.modes), because this one needs numpy:
only the engines import it.

A call's whole blocks go through the device in the engine's overlapped pipeline
(:meth:`StagedGcm._through`): each piece up, through CTR into the piece's output and
through GHASH, whose partial sums the engine folds, in order, once the call's pieces are
done. The ciphertext is hashed where it is: the input's when decrypting (before CTR,
which may write in place), the output's when encrypting. The bytes of a block split
between calls, and a call's whole text where it is short (ghash.hashed_on_the_host),
are hashed on the host, and the keystream of a split block is made there (OpenSSL): on
the device each was a launch and a wait.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np

from ... import ghash
from ..._arrays import BytesResult, finish, input_array, output_array
from ..interface import BLOCK_SIZE
from .device_gcm import DeviceGcm


class StagedGcm(DeviceGcm):
    """:class:`DeviceGcm`'s calls on host data that an engine stages through its device a
    piece at a time: a call is one pass over its text (CTR, and GHASH of the ciphertext:
    the input's when decrypting, before CTR, which may write in place; the output's when
    encrypting), and ``decrypt_and_verify`` into a caller's ``output=`` two (GHASH, the
    tag checked, then CTR), so that a wrong tag releases no plaintext. The engine gives
    :meth:`_through`."""

    def __init__(self, key: bytes, nonce: bytes, mac_len: int,
                 multipliers: ghash.PowerMultipliers, tag_mask: bytes) -> None:
        super().__init__(nonce, mac_len, multipliers, tag_mask,
                         lambda data: input_array(data).nbytes)
        self._key = bytes(key)
        self._j0 = ghash.initial_counter(multipliers.h, nonce)

    @abstractmethod
    def _through(self, source: np.ndarray, target: np.ndarray | None, first_block: int,
                 hashed: str | None) -> int:
        """CTR over the whole blocks of ``source`` (text blocks ``first_block`` on) into
        ``target`` (None: no CTR), in pieces through the device; returns the GHASH partial
        sum of the ``hashed`` side ("input", "output"; None: 0)."""

    # ---- one pass over a call's text -------------------------------------------------------

    def _keystream(self, index: int) -> np.ndarray:
        """The keystream of the message's text block ``index``, made on the host."""
        block = ghash.encrypt_block(self._key, ghash.counter_block(self._j0, 1 + index))
        return np.frombuffer(block, np.uint8)

    def _pass(self, source: np.ndarray, target: np.ndarray | None, start: int,
              hashed: str | None) -> None:
        """One pass over ``source``, text bytes ``start`` on: CTR into ``target`` (None: no
        CTR), and the ciphertext of the ``hashed`` side ("input", "output"; None: nothing)
        added to the GHASH. A block begun or left unfinished is done on the host."""
        length = source.nbytes
        head = min(length, -start % BLOCK_SIZE)
        whole = (length - head) - (length - head) % BLOCK_SIZE
        middle = slice(head, head + whole)
        on_device = hashed is not None and not ghash.hashed_on_the_host(whole)
        # The input's ciphertext read before CTR writes the output, which may be the input.
        text = source if hashed == "input" else None
        before = b"" if text is None else text[:head].tobytes() + (
            b"" if on_device else text[middle].tobytes())
        after = b"" if text is None else text[head + whole :].tobytes()
        if target is not None and head:
            skip = start % BLOCK_SIZE
            np.bitwise_xor(source[:head], self._keystream(start // BLOCK_SIZE)[skip : skip + head],
                           out=target[:head])
        partial = 0
        if whole and (target is not None or on_device):
            partial = self._through(source[middle], None if target is None else target[middle],
                                    (start + head) // BLOCK_SIZE, hashed if on_device else None)
        if target is not None and head + whole < length:
            rest = length - head - whole
            np.bitwise_xor(source[head + whole :],
                           self._keystream((start + head + whole) // BLOCK_SIZE)[:rest],
                           out=target[head + whole :])
        if hashed == "output":
            assert target is not None
            before = target[:head].tobytes() + (b"" if on_device else target[middle].tobytes())
            after = target[head + whole :].tobytes()
        if hashed is None:
            return
        self._ghash.absorb_bytes(before)  # (it ends a block where the middle follows)
        if on_device:
            self._ghash.absorb_partial_sum(partial, whole // BLOCK_SIZE)
        self._ghash.absorb_bytes(after)
        self._ghash.text_bytes += length

    # ---- the device-array GCM's kernels, on host arrays -----------------------------------

    def crypt(self, data: Any, output: Any, first_block: int, skip: int) -> Any:
        source = input_array(data)
        target = np.empty_like(source) if output is None else output_array(output, source.nbytes)
        self._pass(source, target, first_block * BLOCK_SIZE + skip, None)
        return finish(target, output)

    def partial_sum(self, data: Any, offset: int, nbytes: int) -> int:
        return self._through(input_array(data)[offset : offset + nbytes], None, 0, "input")

    def read(self, data: Any, offset: int, nbytes: int) -> bytes:
        return input_array(data)[offset : offset + nbytes].tobytes()

    def host_partial_sum(self, blocks: memoryview) -> int:
        """AAD's whole blocks hashed on the device, through the pipeline."""
        return self.partial_sum(np.frombuffer(blocks, np.uint8), 0, len(blocks))

    # ---- the calls -------------------------------------------------------------------------

    @staticmethod
    def _target(source: np.ndarray, output: Any) -> tuple[np.ndarray, BytesResult | None]:
        """Where a call's text goes: ``output``, or a new result that the call returns as
        bytes, written in place (_arrays.BytesResult: a NumPy result copied into bytes
        cost a second pass and the first touch of a second allocation; 1 GiB of GCM on
        the 16-core H200 host ran at 1.2 GB/s that way, against 8.9 into ``output=``)."""
        if output is not None:
            return output_array(output, source.nbytes), None
        result = BytesResult(source.nbytes)
        return np.frombuffer(result.view, np.uint8), result

    def _text(self, text: Any, output: Any, direction: str) -> Any:
        source = input_array(text)
        target, result = self._target(source, output)
        start = self._start_text(direction, source.nbytes)
        self._pass(source, target, start, "input" if direction == "decrypt" else "output")
        return None if result is None else result.done()

    def encrypt(self, plaintext: Any, output: Any = None) -> Any:
        """Encrypt the next piece: bytes, or None into ``output``."""
        return self._text(plaintext, output, "encrypt")

    def decrypt(self, ciphertext: Any, output: Any = None) -> Any:
        """Decrypt the next piece WITHOUT authenticating it (use decrypt_and_verify)."""
        return self._text(ciphertext, output, "decrypt")

    def decrypt_and_verify(self, ciphertext: Any, received_mac_tag: bytes,
                           output: Any = None) -> Any:
        """Authenticate the whole message, and only then release the (last) piece's
        plaintext: on a wrong tag it raises :class:`AuthenticationError` and releases
        none.

        Into a caller's ``output=``, two passes: GHASH, the tag checked, then CTR, so that
        a wrong tag leaves ``output`` as it was. Into the bytes it returns, which no one
        sees before it does, one pass (CTR and GHASH at once), the plaintext zeroed where
        the tag is wrong: with the second pass, opening into bytes ran at 0.69-0.83 of
        sealing on an H200 (docs/benchmarks, 2026-12-02)."""
        source = input_array(ciphertext)
        out = None if output is None else output_array(output, source.nbytes)
        start = self._start_text("decrypt", source.nbytes)
        if out is None:
            target, result = self._target(source, None)
            assert result is not None
            try:
                self._pass(source, target, start, "input")
                self.verify(received_mac_tag)
            except BaseException:
                target[:] = 0
                raise
            return result.done()
        self._pass(source, None, start, "input")
        self.verify(received_mac_tag)
        self._pass(source, out, start, None)
        return None
