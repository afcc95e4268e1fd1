"""GCM on host data that a GPU engine stages through its device: the device-array GCM's
calls (device_gcm.DeviceGcm) with each call one pass over its text. Apart from
device_gcm.py, which ``import aescl`` loads (aescl.modes), because this one needs numpy:
only the engines import it.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np

from ..._arrays import BytesResult, input_array, output_array
from .device_gcm import DeviceGcm


class StagedGcm(DeviceGcm):
    """:class:`DeviceGcm`'s calls on host data that an engine stages through its device a
    piece at a time: a call is one pass over its text (CTR, and GHASH of the ciphertext:
    the input's when decrypting, before CTR, which may write in place; the output's when
    encrypting), and ``decrypt_and_verify`` two (GHASH, the tag checked, then CTR), so
    that a wrong tag releases no plaintext. The engine gives :meth:`_pass`."""

    @abstractmethod
    def _pass(self, source: np.ndarray, target: np.ndarray | None, start: int,
              hashed: str | None) -> None:
        """One pass over ``source``, text bytes ``start`` on: CTR into ``target`` (None: no
        CTR), and the ciphertext of the ``hashed`` side ("input", "output"; None:
        nothing) added to the GHASH with ``text_bytes``."""

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
        """Authenticate the whole message, and only then decrypt the (last) piece: on a
        wrong tag it raises :class:`AuthenticationError` and releases no plaintext."""
        source = input_array(ciphertext)
        out = None if output is None else output_array(output, source.nbytes)
        start = self._start_text("decrypt", source.nbytes)
        self._pass(source, None, start, "input")
        self.verify(received_mac_tag)
        target, result = self._target(source, out)
        self._pass(source, target, start, None)
        return None if result is None else result.done()
