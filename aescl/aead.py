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

``data`` may be a device array (torch, CuPy, JAX, Numba, pyopencl): it runs on its own
device, and the result is a new flat uint8 array of the same kind on that device
(``encrypt``: ciphertext, then the tag; ``decrypt`` takes that layout, a flat byte
array). Whole blocks up to ONE_MESSAGE_MOST_BYTES go as one message of the
many-messages program below: sealed with its tag in one launch, or opened with its tag
checked on the device (only the verdict read back; a failed message's result is zeroed
and dropped). Others go through the GCM of ``aescl.new(key, MODE_GCM, ...)`` on device
arrays: the tag made and checked on the host (a round trip to the device per message),
and ``decrypt`` opens only once the tag matched (the text read twice), releasing
nothing on a failure. Associated data in a device array is read to the host.

``encrypt_many``/``decrypt_many`` also take a 2-D device array of N messages (its rows),
and return an N x (L + 16) (or N x L) array of its kind; nonces may be an N x 12 array.
Rows of whole blocks (L a multiple of 16) are sealed, or opened with every tag checked
on the device, in one launch a GiB (engines/programs/device_messages.py): by the fused
GCM kernel (GPUs, and CPUs on the T-table rounds), or on a CPU device on its AES
instructions by a one-pass kernel (cl/chunk_seal.cl). Other rows, and a list of device
arrays, go message by message.

A list of device arrays of one library and size (whole blocks) is stacked into the rows
of one 2-D array by the library (torch, CuPy, pyopencl), one array a device, and goes
the same way, the devices at once (a thread each); the results are those arrays' rows.

Other lists go message by message (short host messages straight to pyca). A batch of
host messages in one launch on a CPU device was measured twice and not kept: on the
2-core CI kind, joining the messages and copying each result into its own ``bytes`` cost
about half of pyca's own loop before any AES, and the batch ran 0.1-1.3x that loop
(docs/benchmarks, 2026-11-27 and 11-28; pyca's calls hold the GIL, so two threads of
them take no less than one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM as _PycaAESGCM

from . import ghash
from ._arrays import BytesLike, BytesResult, byte_view, wipe
from .engines.device_arrays import ArrayKind
from .engines.programs import device_messages
from .engines.registry import array_kind_of
from .errors import AuthenticationError
from .modes import MODE_GCM, new
from .scheduler import SPLIT_MIN_BYTES
from .teams import DevicesSpec, array_device_rule, team

TAG_SIZE = 16
# Messages from this size on run on aescl's engines; shorter ones on pyca, where a
# device's (or the host engine's threads') fixed costs outweigh them, as the default team
# keeps such jobs on the host.
ENGINE_MIN_BYTES = SPLIT_MIN_BYTES
# A device array up to this size goes as one message of the many-messages program (its
# tag made on the device, one launch); a longer one through MODE_GCM, spread over the
# whole device (one message of the program runs on one block of threads: 1 MiB took
# 3.7 ms on the H200, against 0.28 ms through MODE_GCM).
ONE_MESSAGE_MOST_BYTES = 64 << 10


class InvalidTags(InvalidTag):
    """Some messages of a ``decrypt_many`` failed authentication. ``failed`` lists their
    indices; ``results`` holds every message's plaintext, in order, with each failed
    one all zeros (no plaintext of a failed message is released): a list, or the N x L
    array for a 2-D device array."""

    def __init__(self, failed: list[int], results: Any) -> None:
        super().__init__(f"{len(failed)} of {len(results)} messages failed authentication: "
                         f"{failed[:8]}{' ...' if len(failed) > 8 else ''}")
        self.failed, self.results = failed, results


def _host_data(value: Any, what: str) -> memoryview:
    """A bytes-like argument in host memory, taken as pyca takes it: a contiguous buffer
    of bytes (unsigned), of any shape."""
    if array_kind_of(value) is not None:
        raise TypeError(f"{what}: must be in host memory (bytes-like), not a device array")
    try:
        view = memoryview(value)
    except TypeError:
        view = None
    if view is None or view.format != "B":
        raise TypeError(f'Cannot convert "{type(value)}" instance to a buffer.')
    if not view.c_contiguous:
        raise BufferError("Buffer is not contiguous.")
    return byte_view(value)


def _zeros_like_opened(sealed: Any) -> Any:
    """What a failed message of a batch gives: zeros of its plaintext's size, of its
    kind (bytes, or a new array beside a device array)."""
    kind = array_kind_of(sealed)
    if kind is None:
        return bytes(max(0, len(byte_view(sealed)) - TAG_SIZE))
    length = max(0, kind.nbytes(sealed) - TAG_SIZE)
    zeros = kind.empty(sealed, length)
    if length:
        kind.write(zeros, 0, bytes(length))
    return kind.finish(sealed, zeros)


def _all_short_bytes(messages: Any, extra: int = 0) -> bool:
    """Whether every message is ``bytes`` or ``bytearray`` shorter than ENGINE_MIN_BYTES
    (+ ``extra``): each then goes to pyca as :meth:`AESGCM.encrypt` would send it, and a
    batch can call pyca directly, without aescl's checks per message (16,384 messages of
    1 KiB on the 2-core CI kind: 146 ms through ``encrypt`` each, 53 ms for pyca's loop)."""
    limit = ENGINE_MIN_BYTES + extra
    return all(type(m) in (bytes, bytearray) and len(m) < limit for m in messages)


class _Nonces:
    """A batch's nonces: a list as given, or the rows of an N x (nonce length) array in
    host or device memory, read to the host once (the nonces go into the host's key
    set-up) and kept as one NumPy array, whose checks and J0s run over all rows at once
    (65,536 nonces: 11 ms for a set of their bytes on the 2-core CI kind, 1.4 ms sorted
    as numbers)."""

    def __init__(self, nonces: Any) -> None:
        kind = array_kind_of(nonces)
        self.rows: np.ndarray | None = None
        self._list: list[Any] | None = None
        if kind is None and getattr(nonces, "ndim", 1) != 2:
            self._list = list(nonces)
            return
        count = len(nonces)
        data = kind.read(nonces, 0, kind.nbytes(nonces)) if kind is not None else \
            bytes(memoryview(nonces).cast("B"))
        self.rows = np.frombuffer(data, np.uint8).reshape(count, len(data) // max(1, count))

    def __len__(self) -> int:
        return len(self._list) if self.rows is None else len(self.rows)

    def subset(self, indices: list[int]) -> _Nonces:
        """The nonces at ``indices``, in that order (checked as a whole already)."""
        part = _Nonces([])
        if self.rows is not None:
            part.rows, part._list = self.rows[indices], None
        else:
            part._list = [self.as_list()[index] for index in indices]
        return part

    def as_list(self) -> list[Any]:
        """Each nonce on its own (a row's bytes for an array)."""
        if self._list is None:
            assert self.rows is not None
            data, each = self.rows.tobytes(), self.rows.shape[1]
            self._list = [data[at : at + each] for at in range(0, len(data), each)] \
                if each else [b""] * len(self.rows)
        return self._list

    def repeated(self) -> bool:
        """Whether a nonce occurs twice."""
        if self.rows is None:
            nonces = self.as_list()
            seen = set(nonces) if set(map(type, nonces)) == {bytes} else \
                {nonce if type(nonce) is bytes else bytes(byte_view(nonce)) for nonce in nonces}
            return len(seen) != len(nonces)
        return _repeated_rows(self.rows)

    def for_plan(self) -> np.ndarray | list[bytes]:
        """The nonces checked as pyca checks each (8 to 128 bytes), for
        device_messages.plan: the array itself, or a list of bytes."""
        if self.rows is not None:
            if not 8 <= self.rows.shape[1] <= 128:
                raise ValueError("Nonce must be between 8 and 128 bytes")
            return self.rows
        nonces = self.as_list()
        if {type(nonce) for nonce in nonces} == {bytes}:  # (the usual list: all at once)
            lengths = set(map(len, nonces))
            if 8 <= min(lengths) and max(lengths) <= 128:
                return nonces
        return [bytes(_check_nonce(nonce)) for nonce in nonces]


def _repeated_rows(rows: np.ndarray) -> bool:
    """Whether two rows of ``rows`` (N x n bytes) are equal: each row folded into a 64-bit
    number, the numbers sorted, and only rows whose numbers repeat compared as bytes."""
    count, width = rows.shape
    if count < 2:
        return False
    rows = np.ascontiguousarray(rows)
    words = -(-max(1, width) // 8)
    if width % 8:  # (padded as records: one copy, not a copy a column of bytes)
        padded = np.zeros(count, [("row", f"V{width}"), ("pad", f"V{8 * words - width}")])
        padded["row"] = rows.view(f"V{width}").reshape(-1)
        numbers = padded.view(np.uint64).reshape(count, words)
    else:
        numbers = rows.view(np.uint64)
    folded = numbers[:, 0].copy()
    for column in range(1, words):
        folded *= np.uint64(0x9E3779B97F4A7C15)
        folded ^= numbers[:, column]
    ordered = np.sort(folded)
    repeats = ordered[1:][ordered[1:] == ordered[:-1]]
    if not repeats.size:
        return False
    suspects = rows[np.isin(folded, repeats)]
    return len({row.tobytes() for row in suspects}) != len(suspects)


class _RepeatCheck:
    """A batch's check for a repeated nonce, made when first asked: for a batch of rows
    in one launch, once the launch is enqueued (sealing), or while the device works,
    before the wait for the verdict (opening: ``meanwhile``), so that the check overlaps
    the device's work. On the H200, 65,536 rows of 4 KiB are 1.45 ms of device work, and
    the check of their nonces was a third of the host's time before the launch. (On a
    thread of its own beside the launch it waited for the GIL: 2.1 ms a call in all.)
    The caller asks before anything of the batch leaves the call, and before any work
    that does not go to the device in one launch."""

    def __init__(self, nonces: _Nonces) -> None:
        self._nonces = nonces
        self._found: bool | None = None

    def repeated(self) -> bool:
        if self._found is None:
            self._found = self._nonces.repeated()
        return self._found

    def refuse(self) -> None:
        """ValueError where a nonce repeats (the misuse a batch makes easy)."""
        if self.repeated():
            raise ValueError("a nonce is repeated within the call: each message needs its "
                             "own")


def _refuse_beside(repeats: _RepeatCheck | None, rows: ArrayKind, result: Any) -> None:
    """``repeats.refuse()`` once a batch's launch is enqueued: a result made under a
    repeated nonce is zeroed before it is dropped (the caching allocators of torch and
    CuPy hand its memory to the process's next empty array)."""
    if repeats is not None and repeats.repeated():
        rows.write(result, 0, bytes(rows.nbytes(result)))
        repeats.refuse()


def _stacked_groups(arrays: Any, tag_bytes: int) -> list[tuple[Any, list[int], Any]] | None:
    """A list of device arrays of one type and kind, each of the same whole blocks (past
    ``tag_bytes`` of tag), as (kind, indices, rows): the arrays at ``indices``, all on one
    device, stacked into the rows of one new 2-D array of their kind there (the
    library's stack: one launch of a copy), one group a device. None where they are not
    such a list, or their kind cannot stack them (they go message by message)."""
    kind = array_kind_of(arrays[0]) if len(arrays) > 1 else None
    if kind is None or len({type(array) for array in arrays}) != 1 \
            or not device_messages.fits(kind.nbytes(arrays[0]) - tag_bytes, len(arrays)):
        return None  # (host data is known by its first message: nothing more is read)
    rows = kind.stack(list(arrays))
    if rows is not None:  # (the usual case: all on one device)
        return [(kind, list(range(len(arrays))), rows)]
    places: dict[Any, list[int]] = {}
    for index, array in enumerate(arrays):
        places.setdefault(kind.device_of(array), []).append(index)
    if len(places) < 2:  # (one device, and the stack refused them: sizes or layouts)
        return None
    groups = []
    for indices in places.values():
        rows = kind.stack([arrays[index] for index in indices])
        if rows is None:
            return None
        groups.append((kind, indices, rows))
    return groups


def _each_at_once(work: Any, groups: list[Any]) -> list[Any]:
    """``work(group)`` for every group, a thread each where there are several (one group a
    device: the devices work at once, and an opening's wait for its verdict holds up no
    other device's)."""
    if len(groups) == 1:
        return [work(groups[0])]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(groups), thread_name_prefix="aescl-aead") as pool:
        return list(pool.map(work, groups))


def _at(associated_data: Any, indices: list[int]) -> Any:
    """The associated data of the messages at ``indices``: its items there for one a
    message, else the same for all."""
    if isinstance(associated_data, list | tuple):
        return [associated_data[index] for index in indices]
    return associated_data


def _aad_bytes(associated_data: Any) -> bytes | None:
    """Associated data as bytes on the host (a device array's read back), None for none."""
    if associated_data is None:
        return None
    kind = array_kind_of(associated_data)
    if kind is not None:
        return kind.read(associated_data, 0, kind.nbytes(associated_data))
    return bytes(_host_data(associated_data, "associated_data"))


def _check_nonce(nonce: Any) -> bytes | memoryview:
    view = nonce if type(nonce) is bytes else _host_data(nonce, "nonce")
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
        self._h: int | None = None  # (the GHASH key, made once asked for)
        self._jobs: dict[str, Any] = {}  # (_rows_job)

    @classmethod
    def generate_key(cls, bit_length: int) -> bytes:
        """A new random key of ``bit_length`` (128, 192 or 256) bits."""
        return _PycaAESGCM.generate_key(bit_length)

    def _cipher(self, nonce: memoryview, associated_data: Any) -> Any:
        cipher = new(self._key, MODE_GCM, nonce=bytes(nonce), device=self._device)
        if associated_data is not None:
            kind = array_kind_of(associated_data)
            cipher.update(kind.read(associated_data, 0, kind.nbytes(associated_data))
                          if kind is not None else
                          _host_data(associated_data, "associated_data"))
        return cipher

    def _encrypt_array(self, kind: ArrayKind, nonce: Any, data: Any,
                       associated_data: Any) -> Any:
        """A device array sealed into a new flat uint8 array beside it: the ciphertext,
        then the tag. Whole blocks go as one message of the many-messages program, its
        tag made on the device (no round trip); other lengths through MODE_GCM."""
        checked = _check_nonce(nonce)
        length = kind.nbytes(data)
        plan = self._one_plan(checked, associated_data, length)
        if plan is not None:
            result = self._rows_job(kind).seal_messages(data, plan)
            if result is not None:
                return kind.finish(data, result)
        cipher = self._cipher(checked, associated_data)
        result = kind.empty(data, length + TAG_SIZE)
        if length:
            cipher.encrypt(data, output=result[:length])
        kind.write(result, length, cipher.digest())
        return kind.finish(data, result)

    def _decrypt_array(self, kind: ArrayKind, nonce: Any, data: Any,
                       associated_data: Any) -> Any:
        """The plaintext of a flat device array (ciphertext, then the tag) in a new one
        beside it, once the tag matched."""
        nbytes = kind.nbytes(data)
        if len(data) != nbytes:
            raise TypeError("data: a device array to decrypt is a flat array of bytes "
                            "(the ciphertext, then the tag), as encrypt returns it")
        if nbytes < TAG_SIZE:
            raise InvalidTag()  # (as pyca: too short to hold a tag)
        checked = _check_nonce(nonce)
        length = nbytes - TAG_SIZE
        plan = self._one_plan(checked, associated_data, length)
        if plan is not None:
            opened = self._rows_job(kind).open_messages(data, plan)
            if opened is not None:
                result, failed_at = opened
                if failed_at == 0:  # (its memory goes back to the library: no plaintext in it)
                    kind.write(result, 0, bytes(length))
                    raise InvalidTag()
                return kind.finish(data, result)
        cipher = self._cipher(checked, associated_data)
        tag = kind.read(data, length, TAG_SIZE)
        if not length:
            try:
                cipher.verify(tag)
            except AuthenticationError:
                raise InvalidTag() from None
            return kind.finish(data, kind.empty(data, 0))
        try:
            return cipher.decrypt_and_verify(data[:length], tag)
        except AuthenticationError:
            raise InvalidTag() from None

    def encrypt(self, nonce: BytesLike, data: BytesLike,
                associated_data: BytesLike | None) -> Any:
        """``data`` sealed: its ciphertext, then the 16-byte tag (bytes; for a device
        array, a new flat uint8 array beside it)."""
        kind = array_kind_of(data)
        if kind is not None:
            return self._encrypt_array(kind, nonce, data, associated_data)
        text = _host_data(data, "data")
        if len(text) < ENGINE_MIN_BYTES:
            return self._pyca.encrypt(nonce, text, associated_data)
        cipher = self._cipher(_check_nonce(nonce), associated_data)
        result = BytesResult(len(text) + TAG_SIZE)
        cipher.encrypt(text, output=result.view[: len(text)])
        result.view[len(text) :] = cipher.digest()
        return result.done()

    def decrypt(self, nonce: BytesLike, data: BytesLike,
                associated_data: BytesLike | None) -> Any:
        """The plaintext of ``data`` (ciphertext, then the tag), once the tag matched;
        else ``InvalidTag`` and no plaintext (bytes; for a device array, a new flat uint8
        array beside it)."""
        kind = array_kind_of(data)
        if kind is not None:
            return self._decrypt_array(kind, nonce, data, associated_data)
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

    def encrypt_many(self, nonces: Any, messages: Any,
                     associated_data: BytesLike | Sequence[BytesLike] | None = None) -> Any:
        """Each message sealed under its own nonce, as :meth:`encrypt` would: a list of
        ciphertext || tag; for a 2-D device array of N messages (its rows), an N x (L + 16)
        array of the same kind. ``nonces``: a list of bytes, or an N x 12 (or other
        nonce length) array, host or device. ``associated_data``: None, one bytes-like
        value for all, or a list (or tuple) of one per message. A nonce repeated within
        the call is refused (ValueError)."""
        batch = _Nonces(nonces)
        rows = array_kind_of(messages)
        count = len(messages)
        aads = self._batch(batch, count, associated_data)
        repeats = _RepeatCheck(batch)
        if rows is None:
            repeats.refuse()
            groups = _stacked_groups(messages, 0)
            if groups is not None:  # (device arrays as the rows of one 2-D array a device)
                return self._seal_groups(groups, batch, aads, associated_data)
            nonces = batch.as_list()
            if _all_short_bytes(messages):  # (pyca's own loop: nothing of aescl's per call)
                encrypt = self._pyca.encrypt
                return [encrypt(nonce, message, aad)
                        for nonce, message, aad in zip(nonces, messages, aads, strict=True)]
            return [self.encrypt(nonce, message, aad)
                    for nonce, message, aad in zip(nonces, messages, aads, strict=True)]
        return self._seal_rows(rows, batch, messages, aads, associated_data, repeats)

    def _seal_groups(self, groups: list[tuple[Any, list[int], Any]], batch: _Nonces,
                     aads: list[Any], associated_data: Any) -> list[Any]:
        """A list's messages sealed a device's group at a time (_stacked_groups), the
        devices at once: the results in the list's order, rows of each group's array."""
        def seal(group: tuple[Any, list[int], Any]) -> Any:
            kind, indices, rows = group
            return self._seal_rows(kind, batch.subset(indices), rows,
                                   [aads[index] for index in indices],
                                   _at(associated_data, indices))

        results: list[Any] = [None] * len(batch)
        for (_, indices, _), sealed in zip(groups, _each_at_once(seal, groups), strict=True):
            for index, row in zip(indices, sealed, strict=True):
                results[index] = row
        return results

    def _seal_rows(self, rows: ArrayKind, batch: _Nonces, messages: Any, aads: list[Any],
                   associated_data: Any, repeats: _RepeatCheck | None = None) -> Any:
        """The rows of a 2-D device array sealed into an N x (L + 16) array of its kind:
        in one launch a batch where they go that way (device_messages.py), else one by
        one. ``repeats``: the batch's repeat check, where the caller has not refused
        repeats already."""
        count = len(messages)
        length = rows.nbytes(messages) // max(1, count)
        width = length + TAG_SIZE
        plan = self._rows_plan(batch, associated_data, aads, length)
        if plan is not None:
            result = self._rows_job(rows).seal_messages(messages, plan)
            if result is not None:  # (one launch: device_messages.py)
                _refuse_beside(repeats, rows, result)
                return rows.finish(messages, result).reshape(count, width)
        if repeats is not None:
            repeats.refuse()
        result = rows.empty(messages, count * width)
        for index, (nonce, aad) in enumerate(zip(batch.as_list(), aads, strict=True)):
            cipher = self._cipher(_check_nonce(nonce), aad)
            if length:
                cipher.encrypt(messages[index], output=result[index * width :
                                                              index * width + length])
            rows.write(result, index * width + length, cipher.digest())
        return rows.finish(messages, result).reshape(count, width)

    def decrypt_many(self, nonces: Any, ciphertexts: Any,
                     associated_data: BytesLike | Sequence[BytesLike] | None = None) -> Any:
        """Each message opened, as :meth:`decrypt` would: a list, or for a 2-D device
        array of N sealed messages (rows of L + 16 bytes) an N x L array of its kind. If
        any tag fails, raises :class:`InvalidTags` (an ``InvalidTag``), naming the failed
        indices, with the other messages' plaintexts and zeros for each failed one
        (``results``: the list, or the array with those rows zeroed)."""
        batch = _Nonces(nonces)
        rows = array_kind_of(ciphertexts)
        count = len(ciphertexts)
        aads = self._batch(batch, count, associated_data)
        repeats = _RepeatCheck(batch)
        failed: list[int] = []
        if rows is not None:
            return self._open_rows(rows, batch, ciphertexts, aads, associated_data, repeats)
        repeats.refuse()
        groups = _stacked_groups(ciphertexts, TAG_SIZE)
        if groups is not None:  # (device arrays as the rows of one 2-D array a device)
            return self._open_groups(groups, batch, aads, associated_data)
        nonces = batch.as_list()
        results: list[Any] = []
        decrypt = (self._pyca.decrypt if _all_short_bytes(ciphertexts, TAG_SIZE)
                   else self.decrypt)  # (as in encrypt_many)
        for index, (nonce, sealed, aad) in enumerate(zip(nonces, ciphertexts, aads,
                                                         strict=True)):
            try:
                results.append(decrypt(nonce, sealed, aad))
            except InvalidTag:
                failed.append(index)
                results.append(_zeros_like_opened(sealed))
        if failed:
            raise InvalidTags(failed, results)
        return results

    def _open_groups(self, groups: list[tuple[Any, list[int], Any]], batch: _Nonces,
                     aads: list[Any], associated_data: Any) -> list[Any]:
        """A list's sealed messages opened a device's group at a time, the devices at
        once (as :meth:`_seal_groups`); InvalidTags, naming every failed index of the
        list, once all are done."""
        def open_group(group: tuple[Any, list[int], Any]) -> tuple[list[int], list[Any]]:
            kind, indices, rows = group
            try:
                return [], list(self._open_rows(kind, batch.subset(indices), rows,
                                                [aads[index] for index in indices],
                                                _at(associated_data, indices)))
            except InvalidTags as failure:
                return [indices[at] for at in failure.failed], list(failure.results)

        results: list[Any] = [None] * len(batch)
        failed: list[int] = []
        for (_, indices, _), (group_failed, opened) in zip(
                groups, _each_at_once(open_group, groups), strict=True):
            failed += group_failed
            for index, row in zip(indices, opened, strict=True):
                results[index] = row
        if failed:
            raise InvalidTags(sorted(failed), results)
        return results

    def _rows_job(self, rows: ArrayKind) -> Any:
        """The engine's job for many messages in arrays of ``rows``'s kind, on the devices
        this object's ``device`` allows: made once a kind and kept, with what it keeps
        for the key (its schedule, H and H's tables on a GPU), as long as this object."""
        if rows.name not in self._jobs:
            self._jobs[rows.name] = rows.messages(
                self._key, array_device_rule(rows.name, team(self._device)))
        return self._jobs[rows.name]

    def _rows_plan(self, nonces: _Nonces, associated_data: Any, aads: list[Any],
                   length: int) -> device_messages.MessagePlan | None:
        """The J0s and tag masks of a 2-D device array's messages, for one launch a batch
        (device_messages.py); None where its rows cannot go that way."""
        if not device_messages.fits(length, len(nonces)):
            return None
        checked = nonces.for_plan()
        if isinstance(associated_data, list | tuple):
            return device_messages.plan(self._key, checked, length,
                                        each_aad=[_aad_bytes(aad) for aad in aads],
                                        h=self._hash_key())
        return device_messages.plan(self._key, checked, length,
                                    common_aad=_aad_bytes(associated_data), h=self._hash_key())

    def _one_plan(self, nonce: memoryview, associated_data: Any,
                  length: int) -> device_messages.MessagePlan | None:
        """One message of ``length`` as a batch of one for the many-messages program;
        None where its length cannot go that way."""
        if not device_messages.fits(length, 1) or length > ONE_MESSAGE_MOST_BYTES:
            return None
        return device_messages.plan(self._key, [bytes(nonce)], length,
                                    common_aad=_aad_bytes(associated_data), h=self._hash_key())

    def _hash_key(self) -> int:
        if self._h is None:
            self._h = ghash.hash_subkey(self._key)
        return self._h

    def _open_rows(self, rows: ArrayKind, nonces: _Nonces, sealed: Any, aads: list[Any],
                   associated_data: Any = None, repeats: _RepeatCheck | None = None) -> Any:
        """The rows of a 2-D device array of sealed messages opened into an N x L array of
        its kind; a failed row is left zeros, and InvalidTags raised at the end. All in
        one launch a batch where the rows go that way (device_messages.py): from the
        first row whose tag failed on, the rows are opened again one by one, to name
        each failed one and zero it."""
        count = len(sealed)
        width = rows.nbytes(sealed) // max(1, count)
        if width < TAG_SIZE:
            raise ValueError(f"rows of {width} bytes cannot hold a {TAG_SIZE}-byte tag")
        length = width - TAG_SIZE
        start, result = 0, None
        plan = self._rows_plan(nonces, associated_data, aads, length)
        if plan is not None:
            opened = self._rows_job(rows).open_messages(
                sealed, plan, None if repeats is None else repeats.repeated)
            if opened is not None:
                result, start = opened
                _refuse_beside(repeats, rows, result)
        if repeats is not None:
            repeats.refuse()
        if result is None:
            result = rows.empty(sealed, count * length)
        failed: list[int] = []
        listed = nonces.as_list() if start < count else []  # (none left to open again)
        for index in range(start, len(listed)):
            nonce, aad = listed[index], aads[index]
            cipher = self._cipher(_check_nonce(nonce), aad)
            tag = rows.read(sealed, index * width + length, TAG_SIZE)
            try:
                if length:
                    cipher.decrypt_and_verify(
                        sealed[index][:length], tag,
                        output=result[index * length : (index + 1) * length])
                else:
                    cipher.verify(tag)
            except AuthenticationError:
                failed.append(index)
                if length:  # (authenticated first: nothing was written; zeros, not garbage)
                    rows.write(result, index * length, bytes(length))
        opened = rows.finish(sealed, result).reshape(count, length)
        if failed:
            raise InvalidTags(failed, opened)
        return opened

    @staticmethod
    def _batch(nonces: _Nonces, count: int, associated_data: Any) -> list[Any]:
        """The associated data of each of ``count`` messages, after the batch's own
        check of as many nonces as messages (no nonce twice: _RepeatCheck)."""
        if len(nonces) != count:
            raise ValueError(f"{len(nonces)} nonces for {count} messages")
        if not isinstance(associated_data, list | tuple):  # (None, or one value for all)
            return [associated_data] * count
        aads = list(associated_data)
        if len(aads) != count:
            raise ValueError(f"{len(aads)} associated data for {count} messages")
        return aads

