"""The authenticated format's keys on the command line: the key options, passphrases
(file, variable or prompt, one line-end rule), and the key read once per command."""

from __future__ import annotations

import os

import click

import aescl
from aescl import chunked, fileformat, filejobs

from .exits import Refusal
from .options import chosen_device


def _without_line_end(text: bytes) -> bytes:
    """The passphrase rule for every source: one line end (``\\n`` or ``\\r\\n``) at
    the end is not part of it (``echo pw > file``, ``export AESCL_PASSPHRASE="$(cat
    file)"``); anything before it is. The prompt's answer never has one."""
    for end in (b"\r\n", b"\n"):
        if text.endswith(end):
            return text[: -len(end)]
    return text


def read_passphrase(passphrase_file: str | None, confirm: bool) -> bytes:
    """From --passphrase-file, else $AESCL_PASSPHRASE, else a prompt on the terminal (no echo)."""
    if passphrase_file is not None:
        try:
            text = _without_line_end(fileformat.read_passphrase_file(passphrase_file))
        except OSError as exc:
            raise Refusal(f"cannot read the passphrase file: {exc.strerror}") from None
        except aescl.FormatError as exc:
            raise Refusal(str(exc)) from None
    elif "AESCL_PASSPHRASE" in os.environ:
        text = _without_line_end(os.fsencode(os.environ["AESCL_PASSPHRASE"]))
    else:
        try:
            with open("/dev/tty"):
                pass
        except OSError:
            raise Refusal("no terminal to ask for the passphrase; use --passphrase-file "
                          "or AESCL_PASSPHRASE") from None
        try:
            text = click.prompt("passphrase", hide_input=True, confirmation_prompt=confirm,
                                err=True).encode()
        except UnicodeError:  # (typed bytes that are not text in the terminal's encoding)
            raise Refusal("the passphrase typed is not valid text in the terminal's "
                          "encoding") from None
    if not text:
        raise Refusal("the passphrase is empty")
    return text


def payload_options(command):
    for option in reversed([
        click.option("--key-file", metavar="FILE", type=click.Path(dir_okay=False),
                     help="Key from FILE: 32 raw bytes or 64 hex digits (aescl keygen)."),
        click.option("--passphrase", "use_passphrase", is_flag=True,
                     help="Ask for a passphrase (no echo; twice when encrypting). "
                          "$AESCL_PASSPHRASE is used instead when set."),
        click.option("--passphrase-file", metavar="FILE",
                     help="Read the passphrase from FILE (one line end at its end is ignored, as "
                          "in $AESCL_PASSPHRASE)."),
        click.option("--batch-chunks", type=click.IntRange(1, chunked.MAX_BATCH_CHUNKS),
                     default=chunked.DEFAULT_BATCH_CHUNKS, show_default=True,
                     help="16 KiB chunks per device launch; up to 6 launches are in "
                          "flight, using about 12 x this x 16 KiB of pinned host memory "
                          "and as much on the device."),
    ]):
        command = option(command)
    return command


# fileformat.KeySource's rules, said in this command's options.
_IN_OPTIONS = {
    "choose one key: a key file, or a passphrase":
        "choose one key: --key-file, or a passphrase",
    "choose a key: a key file or a passphrase":
        "choose a key: --passphrase, --passphrase-file FILE or --key-file FILE (aescl keygen "
        "-o FILE makes one)",
}


class FormatKeys:
    """The authenticated format's key for a command (fileformat.KeySource: read once,
    one prompt, one scrypt), and the jobs that use it."""

    def __init__(self, decrypt, key_file, use_passphrase, passphrase_file, work_factor):
        self._decrypt = decrypt
        # A passphrase is offered by its options; without a key file, decrypting may ask
        # for one (a file says which key it needs), and encrypting takes the variable.
        offered = bool(use_passphrase or passphrase_file) or (
            not key_file and (decrypt or "AESCL_PASSPHRASE" in os.environ))
        try:
            self.source = fileformat.KeySource(
                key_file, (lambda confirm: read_passphrase(passphrase_file, confirm))
                if offered else None, work_factor)
            if not decrypt:
                self.source.for_encrypting()  # asked now, before any work
        except aescl.KeySourceError as exc:
            raise Refusal(_IN_OPTIONS.get(str(exc), str(exc))) from None

    def stream_job(self, batch_chunks):
        def job(source, sink, device, progress):
            if self._decrypt:
                payload = self.source.for_decrypting().read(source)
                fileformat.decrypt_payload(source, sink, payload, device=device,
                                           batch_chunks=batch_chunks, progress=progress)
            else:
                fileformat.encrypt_payload(source, sink, self.source.for_encrypting(),
                                           device=device, batch_chunks=batch_chunks,
                                           progress=progress)
        return job

    def plan(self, inputs, outputs, device, force, in_process) -> filejobs.Plan:
        """A job over files: in this process one task per file (each on every chosen
        device); on a cluster, large local files split into ranges."""
        specs = list(device) or None
        if in_process:
            chosen_device(device)  # an unknown spec is refused here, before any work
        range_bytes = None if in_process else filejobs.DEFAULT_RANGE_BYTES
        if self._decrypt:
            return filejobs.plan_decrypt(inputs, self.source.for_decrypting(), outputs,
                                         device=specs, range_bytes=range_bytes,
                                         replace=force, in_process=in_process)
        return filejobs.plan_encrypt(inputs, self.source.for_encrypting(), outputs,
                                     device=specs, range_bytes=range_bytes, replace=force,
                                     in_process=in_process)
