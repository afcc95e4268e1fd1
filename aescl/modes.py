"""Cipher modes: ECB and CTR objects with pycryptodome's calling convention.

A call's whole blocks are one job for the scheduler (aescl.scheduler), which
splits them over the engines of the chosen devices; every block's output
depends only on its position, so any split gives the same bytes. CTR carries
its counter across calls and keeps the unused keystream of a partial block for
the next call.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import ghash, keyschedule
from ._arrays import (
    BytesLike,
    BytesResult,
    byte_view,
    check_host_in_place_or_apart,
    output_view,
)
from .engines import MODE_GCM, BlockTransform, check_key_schedule, gcm_nonce, host_memory
from .engines.device_arrays import ArrayKind
from .engines.programs.device_gcm import DeviceGcm
from .engines.registry import array_kind_of
from .errors import (
    AuthenticationError,
    CounterOverflowError,
    KeystreamReuseError,
    as_bytes,
    check_whole_number,
)
from .scheduler import Team
from .teams import DevicesSpec, array_device_rule, resolve_devices, team

if TYPE_CHECKING:
    import numpy as np

MODE_ECB = 1  # the values pycryptodome uses
MODE_CTR = 6
_EVERY_CORE: Any = object()  # ``threads`` left out: every core (as 0 given says)

BLOCK_SIZE = keyschedule.BLOCK_SIZE

class EcbCipher:
    """AES-ECB on one or more devices. No padding: lengths must be multiples of 16."""

    mode = MODE_ECB
    block_size = BLOCK_SIZE

    def __init__(self, key: bytes, team: Team, key_schedule: str) -> None:
        keyschedule.rounds_for_key(key)
        self._transforms = {decrypt: BlockTransform(key, decrypt=decrypt, key_schedule=key_schedule)
                            for decrypt in (False, True)}
        self._jobs = {decrypt: team.blocks(transform)
                      for decrypt, transform in self._transforms.items()}
        self._team = team
        self._array_jobs: dict[tuple[str, bool], Any] = {}

    def _process(self, data: BytesLike, output: Any, decrypt: bool) -> bytes | None:
        kind = array_kind_of(data)
        if kind is not None:
            if kind.nbytes(data) % BLOCK_SIZE:
                raise ValueError("Data must be aligned to block boundary in ECB mode")
            if (kind.name, decrypt) not in self._array_jobs:
                self._array_jobs[kind.name, decrypt] = _array_job(
                    kind, self._transforms[decrypt], self._team)
            return self._array_jobs[kind.name, decrypt](data, output)
        source = byte_view(data)
        if len(source) % BLOCK_SIZE:
            raise ValueError("Data must be aligned to block boundary in ECB mode")
        result = BytesResult(len(source)) if output is None else None
        target = result.view if result is not None else _host_output(source, output)
        if len(source):
            self._jobs[decrypt].run(source, target)
        return result.done() if result is not None else None

    def encrypt(self, plaintext: BytesLike, output: Any = None) -> bytes | None:
        """Encrypt whole blocks. Returns bytes, or None when ``output`` receives the result."""
        return self._process(plaintext, output, decrypt=False)

    def decrypt(self, ciphertext: BytesLike, output: Any = None) -> bytes | None:
        """Decrypt whole blocks. Returns bytes, or None when ``output`` receives the result."""
        return self._process(ciphertext, output, decrypt=True)


class CtrCipher:
    """AES-CTR on one or more devices: a keystream over counter blocks ``nonce || counter``.

    The counter is big-endian and fills the ``16 - len(nonce)`` bytes after the
    nonce; it starts at ``initial_value`` and wraps within its field. Successive
    calls continue the stream, partial blocks included. An object either
    encrypts or decrypts, as in pycryptodome. ``seek`` moves anywhere for
    decryption; encryption refuses to reuse keystream it has already used.
    """

    mode = MODE_CTR
    block_size = BLOCK_SIZE

    def __init__(
        self,
        key: bytes,
        nonce: bytes | None,
        initial_value: int | bytes | None,
        team: Team,
        key_schedule: str,
        threads: int | None = None,
        suffix: bytes = b"",
        little_endian: bool = False,
    ) -> None:
        keyschedule.rounds_for_key(key)
        if nonce is None:
            nonce = os.urandom(8)  # pycryptodome's default: half a block, random
        nonce = as_bytes(nonce, "nonce")
        if len(nonce) + len(suffix) >= BLOCK_SIZE:
            raise ValueError("Nonce is too long")
        counter_bytes = BLOCK_SIZE - len(nonce) - len(suffix)
        if not suffix:  # (with a suffix pycryptodome defines no nonce either)
            self.nonce = nonce
        self._counter_bits = 8 * counter_bytes
        self._initial = self._initial_counter(initial_value, counter_bytes)
        self._team = team
        self._array_jobs: dict[str, Any] = {}
        if suffix or little_endian:  # (a Crypto.Util.Counter's other layouts)
            self._transform = None
            self._job: Any = _CounterBlocks(
                team.blocks(BlockTransform(key, key_schedule=key_schedule, threads=threads)),
                nonce, counter_bytes, suffix, little_endian, self._initial)
        else:
            prefix = int.from_bytes(nonce, "big") << self._counter_bits
            self._transform = BlockTransform(
                key, counter=prefix | self._initial, counter_bits=self._counter_bits,
                key_schedule=key_schedule, threads=threads)
            self._job = team.blocks(self._transform)
        self._position = 0  # keystream offset in bytes
        self._encrypted_until = 0  # keystream below this offset has encrypted data
        self._direction: str | None = None
        self._partial: tuple[int, bytes] | None = None  # (block index, its keystream)

    @staticmethod
    def _initial_counter(initial_value: int | bytes | None, counter_bytes: int) -> int:
        if initial_value is None:
            return 0
        if isinstance(initial_value, int):
            if initial_value < 0:
                raise ValueError("Initial counter value must not be negative")
            if initial_value >= 1 << (8 * counter_bytes):
                raise ValueError("Initial counter value is too large")
            return initial_value
        initial_value = as_bytes(initial_value, "initial_value")
        if len(initial_value) != counter_bytes:
            raise ValueError(
                f"Incorrect length for counter byte string ({len(initial_value)} bytes, "
                f"expected {counter_bytes})"
            )
        return int.from_bytes(initial_value, "big")

    @property
    def position(self) -> int:
        """The keystream offset, in bytes, that the next call starts at."""
        return self._position

    def seek(self, offset: int) -> None:
        """Move to byte ``offset`` of the keystream (random access for decryption)."""
        self._position = check_whole_number("offset", offset, 0)

    def _keystream_block(self, index: int) -> bytes:
        if self._partial is None or self._partial[0] != index:
            self._partial = (index, self._job.keystream(index))
        return self._partial[1]

    def _process(self, data: BytesLike, output: Any, direction: str) -> bytes | None:
        if self._direction not in (None, direction):
            raise TypeError(f"{direction}() cannot be called after {self._direction}()")
        kind = array_kind_of(data)
        source = None if kind else byte_view(data)
        length = kind.nbytes(data) if kind else len(source)  # type: ignore[arg-type]
        start = self._position
        if direction == "encrypt" and start < self._encrypted_until:
            raise KeystreamReuseError(
                f"encrypting at offset {start} would reuse keystream already used up to "
                f"offset {self._encrypted_until}"
            )
        if -(-(start + length) // BLOCK_SIZE) > 1 << self._counter_bits:
            raise CounterOverflowError("The counter has wrapped around in CTR mode")
        if kind and self._transform is None:
            raise TypeError("a Crypto.Util.Counter with a suffix or little-endian "
                            "counting takes host data only")
        if kind:
            if kind.name not in self._array_jobs:
                self._array_jobs[kind.name] = _array_job(kind, self._transform, self._team)
            job = self._array_jobs[kind.name]
            result = self._spending(direction, start, length, lambda: job(
                data, output, start // BLOCK_SIZE, start % BLOCK_SIZE))
        else:
            assert source is not None
            written = BytesResult(length) if output is None else None
            target = written.view if written is not None else _host_output(source, output)
            self._spending(direction, start, length,
                           lambda: self._host_crypt(source, target, start, length))
            result = written.done() if written is not None else None
        self._position = start + length
        return result

    def _spending(self, direction: str, start: int, length: int, work: Callable[[], Any]
                  ) -> Any:
        """``work`` with the keystream ``start .. start + length`` counted as used before any
        of it is: a call that fails partway may have encrypted some of its text, and a
        retry at this offset must not encrypt other text under the same keystream. Only a
        refusal of the arguments (TypeError, ValueError), which every engine raises before
        any work, gives the keystream back."""
        before = self._encrypted_until, self._direction
        self._direction = direction
        if direction == "encrypt":
            self._encrypted_until = start + length
        try:
            return work()
        except (TypeError, ValueError):
            self._encrypted_until, self._direction = before
            raise

    def _host_crypt(self, source: memoryview, target: memoryview, start: int,
                    length: int) -> None:
        done = 0
        if start % BLOCK_SIZE and length:  # finish the block a previous call began
            skip = start % BLOCK_SIZE
            done = min(length, BLOCK_SIZE - skip)
            keystream = self._keystream_block(start // BLOCK_SIZE)
            target[:done] = _xor(source[:done], keystream[skip : skip + done])
        whole = (length - done) - (length - done) % BLOCK_SIZE
        if whole:
            first = (start + done) // BLOCK_SIZE
            self._job.run(source[done : done + whole], target[done : done + whole], first)
            done += whole
        if done < length:  # a partial final block: keep its keystream for the next call
            keystream = self._keystream_block((start + done) // BLOCK_SIZE)
            target[done:] = _xor(source[done:], keystream[: length - done])

    def encrypt(self, plaintext: BytesLike, output: Any = None) -> bytes | None:
        """Encrypt, continuing the keystream. Returns bytes, or None when ``output`` is given."""
        return self._process(plaintext, output, "encrypt")

    def decrypt(self, ciphertext: BytesLike, output: Any = None) -> bytes | None:
        """Decrypt, continuing the keystream. Returns bytes, or None when ``output`` is given."""
        return self._process(ciphertext, output, "decrypt")


class _CounterBlocks:
    """CTR over a ``Crypto.Util.Counter`` block whose counter has a suffix after it or
    counts little-endian: ``prefix || counter || suffix``. The engines count big-endian
    at the end of the block only, so here the counter blocks are made on the host and
    encrypted as ECB (``ecb``, a block job), a piece at a time, and XORed in. Slower
    than the engines' own counters, and the same bytes as pycryptodome on every device.
    """

    _PIECE_BLOCKS = 1 << 16  # 1 MiB of counter blocks at a time

    def __init__(self, ecb: Any, prefix: bytes, counter_bytes: int, suffix: bytes,
                 little_endian: bool, initial: int) -> None:
        self._ecb, self._prefix, self._suffix = ecb, prefix, suffix
        self._counter_bytes, self._little_endian, self._initial = (counter_bytes,
                                                                   little_endian, initial)

    def _blocks(self, first: int, count: int) -> Any:
        """Counter blocks ``first .. first+count`` of the stream, as a (count, 16) array."""
        import numpy as np

        width = self._counter_bytes
        start = (self._initial + first) % (1 << 8 * width)
        low = np.uint64(start & (2**64 - 1)) + np.arange(count, dtype=np.uint64)  # wraps
        high = np.full(count, start >> 64, dtype=np.uint64) + (low < low[0])
        counters = np.empty((count, 16), np.uint8)  # each counter as 16 big-endian bytes
        counters[:, :8] = high.astype(">u8").view(np.uint8).reshape(count, 8)
        counters[:, 8:] = low.astype(">u8").view(np.uint8).reshape(count, 8)
        field = counters[:, 16 - width:]  # (the bits above the field fall away: it wraps)
        blocks = np.empty((count, 16), np.uint8)
        blocks[:, : len(self._prefix)] = np.frombuffer(self._prefix, np.uint8)
        blocks[:, len(self._prefix) : 16 - len(self._suffix)] = (
            field[:, ::-1] if self._little_endian else field)
        blocks[:, 16 - len(self._suffix):] = np.frombuffer(self._suffix, np.uint8)
        return blocks.reshape(-1)

    def run(self, source: memoryview, target: memoryview, first_block: int = 0) -> None:
        import numpy as np

        data, out = np.frombuffer(source, np.uint8), np.frombuffer(target, np.uint8)
        for lo in range(0, len(data) // BLOCK_SIZE, self._PIECE_BLOCKS):
            count = min(self._PIECE_BLOCKS, len(data) // BLOCK_SIZE - lo)
            keystream = self._blocks(first_block + lo, count)
            self._ecb.run(keystream, keystream)
            span = slice(lo * BLOCK_SIZE, (lo + count) * BLOCK_SIZE)
            np.bitwise_xor(data[span], keystream, out=out[span])

    def keystream(self, index: int) -> bytes:
        block = self._blocks(index, 1)
        self._ecb.run(block, block)
        return block.tobytes()


def _array_job(kind: ArrayKind, transform: BlockTransform, team: Team) -> Any:
    """The block job over device arrays of ``kind``, from that kind's engine. A cipher
    made for named OpenCL devices takes pyopencl arrays on those devices only; one made
    for ``cuda:N``, CUDA arrays on that GPU only (:func:`teams.array_device_rule`)."""
    return kind.blocks(transform, array_device_rule(kind.name, team))


class GcmCipher:
    """AES-GCM with pycryptodome's calls, on host data or on device arrays.

    Where the text lies decides where the message runs: the first ``encrypt`` or
    ``decrypt`` (or ``*_and_*``) call that takes a device array (a pyopencl array, or a
    CUDA array: torch, CuPy) runs the whole message on device arrays
    (:class:`ArrayGcmCipher`); host data runs on the engine the team chooses for GCM
    streams. AAD given before that (host bytes) is kept until then, and a ``digest``
    with no text at all runs on the host path.

    This class is the one place where pycryptodome's call order is enforced, for every
    engine and every kind of array (:data:`_NEXT_CALLS`), with two rules of aescl's on
    top: after a failed ``verify`` the message is rejected for good (``digest``,
    ``decrypt`` and further ``verify`` calls raise), and an ``encrypt`` or ``decrypt``
    that raised leaves the object unusable, since part of its keystream may be spent.
    """

    mode = MODE_GCM
    block_size = BLOCK_SIZE

    # pycryptodome's GCM: the calls each call allows next.
    _NEXT_CALLS = {
        "update": frozenset({"update", "encrypt", "decrypt", "digest", "verify"}),
        "encrypt": frozenset({"encrypt", "digest"}),
        "decrypt": frozenset({"decrypt", "verify"}),
        "digest": frozenset({"digest"}),
        "verify": frozenset({"verify"}),
    }

    def __init__(self, key: bytes, nonce: bytes | None, mac_len: int, team: Team,
                 key_schedule: str, threads: int | None) -> None:
        self.nonce = gcm_nonce(nonce, mac_len)
        self._key, self._mac_len, self._team = key, mac_len, team
        self._key_schedule, self._threads = key_schedule, threads
        self._message: Any = None  # the engine's GCM stream, or an ArrayGcmCipher
        self._kind: ArrayKind | None = None
        self._aad: list[bytes] = []
        self._allowed = self._NEXT_CALLS["update"]
        self._last = "initialization"
        self._broken: Exception | None = None  # a text call raised: the object is spent
        self._rejected = False  # a verify failed

    def _enter(self, call: str) -> None:
        """Refuse ``call`` where pycryptodome's order (or a failure before) forbids it."""
        if self._rejected:
            if call == "verify":
                raise AuthenticationError("MAC check failed")
            raise TypeError(f"{call}() cannot be called after a failed verify(): the "
                            "message was rejected")
        if self._broken is not None:
            raise TypeError(f"{call}() cannot be called after {self._last}() failed "
                            f"({self._broken})")
        if call not in self._allowed:
            raise TypeError(f"{call}() cannot be called after {self._last}()")

    def _entered(self, call: str) -> None:
        self._allowed, self._last = self._NEXT_CALLS[call], call

    def _text(self, call: str, run: Callable[[], Any]) -> Any:
        self._enter(call)
        try:
            result = run()
        except AuthenticationError:
            self._rejected = True
            raise
        except Exception as exc:
            self._broken, self._last = exc, call
            raise
        self._entered(call)
        return result

    def _for(self, data: Any = None, kind: ArrayKind | None = None) -> Any:
        """The message's cipher, made for where ``data`` (of ``kind``: None for host
        memory) lies on the first text call."""
        if self._message is None:
            if kind is None:
                self._message = self._team.stream_engine().gcm(
                    self._key, self.nonce, self._mac_len, self._key_schedule, self._threads)
                for aad in self._aad:
                    self._message.update(aad)
            else:
                self._message = ArrayGcmCipher(self._key, self.nonce, self._mac_len, kind,
                                               self._team, self._aad, like=data)
            self._kind = kind
            self._aad.clear()
        elif data is not None and kind is not self._kind:
            where = "host memory" if self._kind is None else self._kind.arrays
            raise TypeError(f"this message's text is in {where}: pass all of it the same way")
        return self._message

    def update(self, assoc_data: BytesLike) -> GcmCipher:
        """Add associated data (authenticated, not encrypted). Only before encrypt/decrypt."""
        self._enter("update")
        if self._message is None:
            self._aad.append(bytes(byte_view(assoc_data)))
        else:
            self._message.update(assoc_data)
        self._entered("update")
        return self

    @staticmethod
    def _kind_checked(data: Any, output: Any) -> ArrayKind | None:
        """The kind of device array ``data`` is (None: host memory), with a host
        ``output=`` checked against it."""
        kind = array_kind_of(data)
        if output is not None and kind is None:
            _host_output(byte_view(data), output)
        return kind

    def encrypt(self, plaintext: Any, output: Any = None) -> Any:
        """Encrypt the next piece. Returns bytes (a new array like a device array), or
        None when ``output`` receives it."""
        kind = self._kind_checked(plaintext, output)
        return self._text("encrypt", lambda: self._for(plaintext, kind).encrypt(
            plaintext, output=output))

    def decrypt(self, ciphertext: Any, output: Any = None) -> Any:
        """Decrypt the next piece WITHOUT authenticating it (use decrypt_and_verify)."""
        kind = self._kind_checked(ciphertext, output)
        return self._text("decrypt", lambda: self._for(ciphertext, kind).decrypt(
            ciphertext, output=output))

    def digest(self) -> bytes:
        """The authentication tag (``mac_len`` bytes) of the AAD and the encrypted text."""
        self._enter("digest")
        tag: bytes = self._for().digest()
        self._entered("digest")
        return tag

    def hexdigest(self) -> str:
        return self.digest().hex()

    def verify(self, received_mac_tag: bytes) -> None:
        """Check a tag; raises :class:`AuthenticationError` ("MAC check failed") if wrong,
        and from then on the message is rejected."""
        self._enter("verify")
        received_mac_tag = as_bytes(received_mac_tag, "the MAC tag")
        try:
            self._for().verify(received_mac_tag)
        except AuthenticationError:
            self._rejected = True
            raise
        self._entered("verify")

    def hexverify(self, hex_mac_tag: str) -> None:
        self.verify(bytes.fromhex(hex_mac_tag))

    def encrypt_and_digest(self, plaintext: Any, output: Any = None) -> tuple[Any, bytes]:
        """Encrypt the (last) piece and return it with the tag."""
        return self.encrypt(plaintext, output=output), self.digest()

    def decrypt_and_verify(self, ciphertext: Any, received_mac_tag: bytes,
                           output: Any = None) -> Any:
        """Authenticate the whole message, and only then decrypt the (last) piece: on a
        wrong tag it raises :class:`AuthenticationError` and releases no plaintext."""
        self._enter("decrypt")
        received_mac_tag = as_bytes(received_mac_tag, "the MAC tag")
        kind = self._kind_checked(ciphertext, output)
        result = self._text("decrypt", lambda: self._for(ciphertext, kind).decrypt_and_verify(
            ciphertext, received_mac_tag, output=output))
        self._entered("verify")
        return result


class ArrayGcmCipher(DeviceGcm):
    """One GCM message whose text is in device arrays of one kind (pyopencl or CUDA
    arrays: engines/device_arrays.py), on the arrays' devices (engines/programs/device_gcm.py):
    the CTR kernel over the arrays, the GHASH kernel's partial sums of their whole
    blocks.

    A call returns once the GHASH sums of its ciphertext are read back: an ``encrypt``
    waits for its own CTR work, a ``decrypt`` for the work that produced its input.
    AAD is host data. ``decrypt_and_verify`` authenticates before it decrypts, so a
    wrong tag leaves ``output`` as it was.
    """

    def __init__(self, key: bytes, nonce: bytes, mac_len: int, kind: ArrayKind, team: Team,
                 aad: list[bytes], like: Any) -> None:
        """``aad``: the message's AAD, hashed on the device of ``like`` (the message's first
        text array, not kept) where it is long."""
        h, tag_mask = ghash.hash_subkey_and_tag_mask(key, nonce)
        multipliers = ghash.PowerMultipliers(h)
        super().__init__(nonce, mac_len, multipliers, tag_mask, kind.nbytes)
        self._ctr = _array_job(kind, BlockTransform(key, counter=self.first_counter,
                                                    counter_bits=32), team)
        self._sums = kind.ghash(key, multipliers)
        for data in aad:
            self.absorb_aad(memoryview(data),
                            lambda blocks: self._sums.host_partial_sum(like, blocks))

    def crypt(self, data: Any, output: Any, first_block: int, skip: int) -> Any:
        return self._ctr(data, output, first_block, skip)

    def partial_sum(self, data: Any, offset: int, nbytes: int) -> int:
        return self._sums.partial_sum(data, offset, nbytes)  # type: ignore[no-any-return]

    def read(self, data: Any, offset: int, nbytes: int) -> bytes:
        return self._sums.read(data, offset, nbytes)  # type: ignore[no-any-return]


def _host_output(source: memoryview, output: Any) -> memoryview:
    """A caller's ``output=`` for host data ``source``: as long, and the input's own memory
    or apart from it."""
    target = output_view(output, len(source))
    check_host_in_place_or_apart(source, target)
    return target


def _xor(data: memoryview, keystream: bytes) -> bytes:
    """Less than a block of data XORed with its keystream (the partial blocks of CTR)."""
    mixed = int.from_bytes(data, "big") ^ int.from_bytes(keystream, "big")
    return mixed.to_bytes(len(data), "big")


def pinned_empty(nbytes: int, device: DevicesSpec = None) -> np.ndarray:
    """A uint8 array of ``nbytes`` in page-locked host memory for ``device`` (for a
    list or ``all`` with a CUDA GPU, memory the CUDA engine pins, else its first
    OpenCL device apart from host memory, a GPU; ordinary
    memory for a list whose OpenCL devices are all CPUs, which work on ordinary
    memory in place). Where ``device`` is or includes the host engine, the memory is
    also shared with the host engine's worker processes (Linux), which then do its
    jobs on these arrays apart from this interpreter: the chunked format on every
    core, and CTR/ECB beside a GPU without slowing the GPU's feeding thread. For two
    GPUs or more of either engine it is shared memory pinned for each, and each GPU
    works its share of a job on it in a process of its own.

    Cipher calls whose input and ``output=`` lie in such arrays move data straight
    between them and the device at the full PCIe rate; ordinary arrays go through
    the library's own pinned staging buffers, one host copy each way.
    """
    check_whole_number("nbytes", nbytes, 0)
    return host_memory.pinned_empty(nbytes, resolve_devices(device))


def _counter_block(counter: Any) -> tuple[bytes, int, bytes, bool]:
    """(nonce, initial value, suffix, little-endian) of a ``Crypto.Util.Counter.new(...)``
    object: the block is ``prefix || counter || suffix``, and the prefix is the nonce."""
    try:
        fields = dict(counter)
        counter_len, prefix = fields["counter_len"], bytes(fields["prefix"])
        suffix, initial_value = bytes(fields["suffix"]), fields["initial_value"]
        little_endian = fields["little_endian"]
    except (KeyError, TypeError, ValueError):
        raise TypeError("Incorrect counter object (use Crypto.Util.Counter.new)") from None
    if len(prefix) + counter_len + len(suffix) != BLOCK_SIZE:
        raise ValueError(f"Size of the counter block ({len(prefix) + counter_len + len(suffix)}"
                         f" bytes) must match block size ({BLOCK_SIZE})")
    return prefix, initial_value, suffix, bool(little_endian)


def new(
    key: bytes,
    mode: int,
    *args: Any,
    nonce: bytes | None = None,
    initial_value: int | bytes | None = None,
    counter: Any = None,
    mac_len: int | None = None,
    threads: int = _EVERY_CORE,
    use_aesni: bool = True,
    use_clmul: bool | None = None,
    device: DevicesSpec = None,
    key_schedule: str = "host",
) -> EcbCipher | CtrCipher | GcmCipher:
    """Create a cipher object, as ``Crypto.Cipher.AES.new`` does, running on ``device``:
    a device or spec, ``"all"``, or a list of them (aescl.scheduler splits ECB and CTR
    over them; GCM, one sequential stream, runs on the fastest of them).

    The arguments pycryptodome's ``AES.new`` takes for each of these modes are taken
    here with the same meaning, defaults and errors: GCM's positional nonce (16 random
    bytes when none is given), CTR's ``counter=`` (a ``Crypto.Util.Counter``, any
    layout: :class:`_CounterBlocks`), ``threads=`` for CTR and GCM (the most threads the
    host engine uses; 0: every core; OpenCL devices ignore it; aescl's default is
    every core), and ``use_aesni``/``use_clmul``, accepted and ignored: each engine
    chooses the CPU's instructions itself (docs/security.md)."""
    key = as_bytes(key, "key")
    keyschedule.rounds_for_key(key)
    check_key_schedule(key_schedule)
    if mode not in (MODE_ECB, MODE_CTR, MODE_GCM):
        raise ValueError(f"unsupported mode {mode!r}: use MODE_ECB, MODE_CTR or MODE_GCM")
    if args:  # pycryptodome's positional argument after the mode
        if mode == MODE_ECB:
            raise TypeError("IV is not meaningful for the ECB mode")
        if mode == MODE_CTR or len(args) > 1:
            raise TypeError("Too many arguments for this mode")
        nonce = args[0]  # (over nonce=, as in pycryptodome)
    given_threads = threads is not _EVERY_CORE
    if given_threads:  # as pycryptodome 4.4 checks it: None and True are not integers
        if not isinstance(threads, int) or isinstance(threads, bool):
            raise TypeError("'threads' must be an integer")
        if threads < 0:
            raise ValueError("'threads' must be a non-negative integer")
    not_for = {MODE_ECB: {"nonce": nonce, "initial_value": initial_value, "counter": counter,
                          "mac_len": mac_len, "threads": threads if given_threads else None,
                          "use_clmul": use_clmul},
               MODE_CTR: {"mac_len": mac_len, "use_clmul": use_clmul},
               MODE_GCM: {"initial_value": initial_value, "counter": counter}}[mode]
    unknown = {name: value for name, value in not_for.items() if value is not None}
    if unknown:
        raise TypeError(f"Unknown parameters for this mode: {unknown}")
    threads = (threads or None) if given_threads else None  # None: every core
    if mode == MODE_ECB:
        return EcbCipher(key, team(device), key_schedule)
    if mode == MODE_CTR:
        if counter is not None:
            if nonce is not None or initial_value is not None:
                raise TypeError("'counter' and 'nonce'/'initial_value' are mutually exclusive")
            nonce, initial_value, suffix, little_endian = _counter_block(counter)
            return CtrCipher(key, nonce, initial_value, team(device), key_schedule, threads,
                             suffix, little_endian)
        return CtrCipher(key, nonce, initial_value, team(device), key_schedule, threads)
    return GcmCipher(key, nonce, 16 if mac_len is None else mac_len, team(device),
                     key_schedule, threads)
