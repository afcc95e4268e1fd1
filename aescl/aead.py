"""``aescl.AESGCM``: pyca ``cryptography``'s AESGCM calls (``encrypt(nonce, data,
associated_data)`` returning ciphertext || tag, ``decrypt``, ``generate_key``), with
aescl's engines behind them, and many messages in one call (``encrypt_many``,
``decrypt_many``).

Each message is standard AES-GCM, byte-identical to pyca's for the same arguments, and the
arguments follow pyca's rules: pyca checks the key, and a nonce of 8 to 128 bytes, as
pyca does. A failed tag raises ``cryptography.exceptions.InvalidTag`` (for a batch, a
subclass that names the failed messages), so code that catches it keeps working.

Where each message runs: host data below :data:`ENGINE_MIN_BYTES` goes to pyca itself,
whose one-shot call is the fastest way to seal a short message on the host; from there
on, to the device aescl's default team (or ``device=``) chooses for a GCM stream, with
the result written once into the ``bytes`` returned (aescl.modes, _arrays.BytesResult).

Not yet here (issue 56): device arrays (they raise TypeError), one launch for many
messages on a GPU, and a batch on host data faster than a loop of pyca calls (the many
calls are that loop today).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM as _PycaAESGCM

from ._arrays import BytesLike, BytesResult, byte_view, wipe
from .engines.registry import array_kind_of
from .errors import AuthenticationError
from .modes import MODE_GCM, new
from .scheduler import SPLIT_MIN_BYTES
from .teams import DevicesSpec

TAG_SIZE = 16
# Messages from this size on run on aescl's engines; shorter ones on pyca, where a
# device's (or the host engine's threads') fixed costs outweigh them, as the default team
# keeps such jobs on the host.
ENGINE_MIN_BYTES = SPLIT_MIN_BYTES


class InvalidTags(InvalidTag):
    """Some messages of a ``decrypt_many`` failed authentication. ``failed`` lists their
    indices; ``results`` holds every message's plaintext, in order, with each failed
    one all zeros (no plaintext of a failed message is released)."""

    def __init__(self, failed: list[int], results: list[bytes]) -> None:
        super().__init__(f"{len(failed)} of {len(results)} messages failed authentication: "
                         f"{failed[:8]}{' ...' if len(failed) > 8 else ''}")
        self.failed, self.results = failed, results


def _host_data(value: Any, what: str) -> memoryview:
    """A bytes-like argument in host memory, taken as pyca takes it: a contiguous buffer
    of bytes (unsigned), of any shape. A device array is not taken yet."""
    if array_kind_of(value) is not None:
        raise TypeError(f"{what}: device arrays are not taken by aescl.AESGCM yet; pass "
                        "host memory, or use aescl.new(key, aescl.MODE_GCM, ...)")
    try:
        view = memoryview(value)
    except TypeError:
        view = None
    if view is None or view.format != "B":
        raise TypeError(f'Cannot convert "{type(value)}" instance to a buffer.')
    if not view.c_contiguous:
        raise BufferError("Buffer is not contiguous.")
    return byte_view(value)


def _check_nonce(nonce: Any) -> memoryview:
    view = _host_data(nonce, "nonce")
    if not 8 <= len(view) <= 128:
        raise ValueError("Nonce must be between 8 and 128 bytes")
    return view


class AESGCM:
    """A drop-in for ``cryptography.hazmat.primitives.ciphers.aead.AESGCM`` over aescl's
    engines (see the module's docstring). ``device`` picks where long messages run, as
    everywhere in aescl (None: the default team's choice)."""

    def __init__(self, key: BytesLike, *, device: DevicesSpec = None) -> None:
        self._pyca = _PycaAESGCM(key)  # (pyca's own checks of the key, and its rules)
        self._key = bytes(byte_view(key))
        self._device = device

    @classmethod
    def generate_key(cls, bit_length: int) -> bytes:
        """A new random key of ``bit_length`` (128, 192 or 256) bits."""
        return _PycaAESGCM.generate_key(bit_length)

    def _cipher(self, nonce: memoryview, associated_data: Any) -> Any:
        cipher = new(self._key, MODE_GCM, nonce=bytes(nonce), device=self._device)
        if associated_data is not None:
            cipher.update(_host_data(associated_data, "associated_data"))
        return cipher

    def encrypt(self, nonce: BytesLike, data: BytesLike,
                associated_data: BytesLike | None) -> bytes:
        """``data`` sealed: its ciphertext, then the 16-byte tag."""
        text = _host_data(data, "data")
        if len(text) < ENGINE_MIN_BYTES:
            return self._pyca.encrypt(nonce, text, associated_data)
        cipher = self._cipher(_check_nonce(nonce), associated_data)
        result = BytesResult(len(text) + TAG_SIZE)
        cipher.encrypt(text, output=result.view[: len(text)])
        result.view[len(text) :] = cipher.digest()
        return result.done()

    def decrypt(self, nonce: BytesLike, data: BytesLike,
                associated_data: BytesLike | None) -> bytes:
        """The plaintext of ``data`` (ciphertext, then the tag), once the tag matched;
        else ``InvalidTag`` and no plaintext."""
        sealed = _host_data(data, "data")
        if len(sealed) < ENGINE_MIN_BYTES + TAG_SIZE:
            return self._pyca.decrypt(nonce, sealed, associated_data)
        cipher = self._cipher(_check_nonce(nonce), associated_data)
        length = len(sealed) - TAG_SIZE
        result = BytesResult(length)
        # One pass, then the tag: the plaintext lies only in this call's own result until
        # the tag matched, and is wiped where it did not (decrypt_and_verify would make
        # two passes, to keep a caller's output= unwritten).
        cipher.decrypt(sealed[:length], output=result.view)
        try:
            cipher.verify(bytes(sealed[length:]))
        except AuthenticationError:
            wipe(result.view)
            raise InvalidTag() from None
        return result.done()

    def encrypt_many(self, nonces: Sequence[BytesLike], messages: Sequence[BytesLike],
                     associated_data: BytesLike | Sequence[BytesLike] | None = None
                     ) -> list[bytes]:
        """Each message sealed under its own nonce, as :meth:`encrypt` would: a list of
        ciphertext || tag. ``associated_data``: None, one bytes-like value for all, or a
        list (or tuple) of one per message. A nonce repeated within the call is refused
        (ValueError)."""
        aads = self._batch(nonces, messages, associated_data)
        return [self.encrypt(nonce, message, aad)
                for nonce, message, aad in zip(nonces, messages, aads, strict=True)]

    def decrypt_many(self, nonces: Sequence[BytesLike], ciphertexts: Sequence[BytesLike],
                     associated_data: BytesLike | Sequence[BytesLike] | None = None
                     ) -> list[bytes]:
        """Each message opened, as :meth:`decrypt` would. If any tag fails, raises
        :class:`InvalidTags` (an ``InvalidTag``), naming the failed indices, with the
        other messages' plaintexts and zeros for each failed one."""
        aads = self._batch(nonces, ciphertexts, associated_data)
        results: list[bytes] = []
        failed: list[int] = []
        for index, (nonce, sealed, aad) in enumerate(zip(nonces, ciphertexts, aads,
                                                         strict=True)):
            try:
                results.append(self.decrypt(nonce, sealed, aad))
            except InvalidTag:
                failed.append(index)
                results.append(bytes(max(0, len(byte_view(sealed)) - TAG_SIZE)))
        if failed:
            raise InvalidTags(failed, results)
        return results

    @staticmethod
    def _batch(nonces: Sequence[BytesLike], messages: Sequence[BytesLike],
               associated_data: Any) -> list[Any]:
        """The associated data of each message, after the batch's own checks: as many
        nonces as messages, and no nonce twice (the misuse a batch makes easy)."""
        if len(nonces) != len(messages):
            raise ValueError(f"{len(nonces)} nonces for {len(messages)} messages")
        seen = {bytes(byte_view(nonce)) for nonce in nonces}
        if len(seen) != len(nonces):
            raise ValueError("a nonce is repeated within the call: each message needs its "
                             "own")
        if not isinstance(associated_data, list | tuple):  # (None, or one value for all)
            return [associated_data] * len(messages)
        aads = list(associated_data)
        if len(aads) != len(messages):
            raise ValueError(f"{len(aads)} associated data for {len(messages)} messages")
        return aads

