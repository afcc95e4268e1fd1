"""Every exception aescl raises on purpose, under one base class.

Each name says what the caller must do differently. Where Python has a natural
built-in meaning (a bad argument, an exhausted counter), the aescl exception also
derives from that built-in, so code written for pycryptodome keeps working.
"""

from __future__ import annotations


class AesclError(Exception):
    """Base class of all aescl errors."""


class DeviceNotFound(AesclError, LookupError):
    """No OpenCL device matches the requested spec (the message lists those that exist)."""


class NoPlatformError(DeviceNotFound):
    """No OpenCL platform at all: install the ``pocl`` extra or a vendor driver."""


class DeviceUnavailable(AesclError, RuntimeError):
    """A device's driver would not start it for aescl: no context or queue on it (out of
    the device's or the host's memory, or held by other processes). The message names
    the device and what the driver said; the same call may work once that is freed."""


class KernelBuildError(AesclError, RuntimeError):
    """The OpenCL compiler rejected a kernel; ``build_log`` holds what it said."""

    def __init__(self, message: str, build_log: str = "") -> None:
        super().__init__(message if not build_log else f"{message}\n{build_log}")
        self.build_log = build_log


class CounterOverflowError(AesclError, OverflowError):
    """CTR would reuse a counter block: the counter field is exhausted.

    Raised before any work is launched, as pycryptodome does.
    """


class KeystreamReuseError(AesclError, ValueError):
    """Encrypting here would reuse keystream that already encrypted other data.

    Happens when ``encrypt`` follows a ``seek`` back into keystream this object
    has already used for encryption. Decryption may seek freely.
    """


class PaddingError(AesclError, ValueError):
    """ECB decryption found no valid PKCS#7 padding: a wrong key, or unpadded data."""


class AuthenticationError(AesclError, ValueError):
    """The data is not what was encrypted: modified, reordered, or under another nonce.

    Like pycryptodome's ``ValueError("MAC check failed")``. No plaintext of the
    failed part is released. ``chunk`` is the index of the first failing chunk
    when the chunked format raises it, else None.
    """

    def __init__(self, message: str, chunk: int | None = None) -> None:
        super().__init__(message)
        self.chunk = chunk


def check_whole_number(name: str, value: object, least: int, most: int | None = None) -> int:
    """``value`` if it is a whole number (not a bool) from ``least`` to ``most``; else
    TypeError or ValueError naming ``name``, before any work starts."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be a whole number, not {value!r}")
    if value < least or (most is not None and value > most):
        bounds = (f"from {least} to {most}" if most is not None else
                  "not negative" if least == 0 else f"at least {least}")
        raise ValueError(f"{name} must be {bounds}, not {value}")
    return value


def as_bytes(value: object, what: str) -> bytes:
    """A key, nonce, salt or context given as any bytes-like object, as bytes. Anything
    else is refused (TypeError), as pycryptodome refuses it: ``bytes()`` of an int is
    that many zero bytes, so ``key=16`` would have been an all-zero key."""
    try:
        return bytes(memoryview(value))
    except TypeError:
        raise TypeError(f"{what} must be bytes-like (bytes, bytearray, memoryview), "
                        f"not {type(value).__name__}") from None


def first_failure(errors: list[BaseException]) -> BaseException:
    """Of the failures of one job's parallel parts, the one to report: the rejection of
    the lowest chunk (parts run in any order, but the message's first bad chunk is the
    one to name), else the first failure."""
    rejections = [e for e in errors if isinstance(e, AuthenticationError) and e.chunk is not None]
    return min(rejections, key=lambda e: e.chunk) if rejections else errors[0]  # type: ignore


class WrongKeyError(AuthenticationError):
    """The key (or passphrase) or the context is not the one the data was encrypted with.

    The chunked format's key commitment detects this before any chunk is decrypted.
    """


class TruncatedError(AuthenticationError):
    """The ciphertext ends early: its final chunk is missing (the data was cut short)."""


class InputChangedError(AesclError, OSError):
    """A file job's input is not the file that was planned: it changed size or time since,
    or the machine running the task sees another file under that name. Nothing of the
    job is published."""


class FormatError(AesclError, ValueError):
    """The input is not in the expected format at all (bad magic, version or layout)."""


class KeySourceError(AesclError, ValueError):
    """The file needs the other kind of key: a key file rather than a passphrase, or back."""
