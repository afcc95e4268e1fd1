"""Encrypt and decrypt files on a Dask cluster: ``pip install 'aescl[dask]'``.

    >>> from distributed import Client
    >>> from aescl import distributed
    >>> client = Client("tcp://scheduler:8786")
    >>> distributed.encrypt_files(client, ["a.csv", "b.csv"], key=key)   # a.csv.aescl, ...
    >>> distributed.decrypt_files(client, ["big.bin.aescl"], key=key)    # split in ranges

Each file is one task, and a local (or shared POSIX) file larger than
``range_bytes`` is split into ranges of whole 16 KiB chunks that workers seal
or open independently; the output is byte-identical to what one process writes
for the same key and payload salt. The job is planned here (:mod:`aescl.filejobs`):
outputs are checked, keys derived once (one scrypt per passphrase), and every
output created under a hidden part name. Workers run the tasks on their own
machine's devices, chosen by the usual specs (``device=``, else each worker's
``$AESCL_DEVICE``, else its measured default); ``resources={"GPU": 1}`` sends
tasks only to workers started with ``dask worker --resources GPU=1``.

Every path must mean the same file to this process and to every worker: a
shared file system, or a URL fsspec knows (``s3://``, ...). Outputs appear only
when every task of the job succeeded. A worker that dies mid-task is restarted
by its nanny and the task runs again from the start of its file or range, with
the same result. A wrong key, a modified or truncated file, or any other error
fails the whole job with that error, and no output appears.

The payload key (never the passphrase) travels to the workers inside the tasks.
Connect to the scheduler over TLS (``tls://``, with Dask's security settings)
wherever the network between client, scheduler and workers is not trusted.
"""

from __future__ import annotations

import contextlib
import secrets
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from distributed import Client, KilledWorker, as_completed
from distributed.diagnostics.plugin import SchedulerPlugin

from .errors import AesclError
from .fileformat import DEFAULT_WORK_FACTOR, KeyRing, PayloadKey
from .filejobs import (
    DEFAULT_RANGE_BYTES,
    Devices,
    Location,
    Plan,
    Task,
    plan_decrypt,
    plan_encrypt,
)

__all__ = ["DEFAULT_RANGE_BYTES", "RESOURCES_WAIT_SECONDS", "Client", "KilledWorker",
           "NoWorkerError", "PartsOfALostClient", "check_address", "decrypt_files",
           "encrypt_files", "run", "wait_for_resources"]

Progress = Callable[[int], None]


def encrypt_files(
    client: Client, inputs: Sequence[str], outputs: Sequence[str] | None = None, *,
    key: bytes | None = None, passphrase: bytes | None = None,
    work_factor: int = DEFAULT_WORK_FACTOR, device: Devices = None,
    resources: dict[str, float] | None = None, range_bytes: int | None = DEFAULT_RANGE_BYTES,
    force: bool = False, progress: Progress | None = None, salt: bytes | None = None,
) -> list[str]:
    """Encrypt every input (default outputs: ``INPUT.aescl``) on the cluster; returns
    the outputs. ``salt`` fixes split files' payload salt, for tests only."""
    payload = PayloadKey.new(key, passphrase, work_factor)
    plan = plan_encrypt(inputs, payload, outputs, device=device, range_bytes=range_bytes,
                        replace=force, salt=salt)
    return run(client, plan, resources, progress)


def decrypt_files(
    client: Client, inputs: Sequence[str], outputs: Sequence[str] | None = None, *,
    key: bytes | None = None, passphrase: Callable[[], bytes] | None = None,
    device: Devices = None, resources: dict[str, float] | None = None,
    range_bytes: int | None = DEFAULT_RANGE_BYTES, force: bool = False,
    progress: Progress | None = None,
) -> list[str]:
    """Decrypt every input (default outputs: INPUT without ``.aescl``) on the cluster;
    ``passphrase`` is called at most once, and only if a file needs it."""
    plan = plan_decrypt(inputs, KeyRing(key, passphrase), outputs, device=device,
                        range_bytes=range_bytes, replace=force)
    return run(client, plan, resources, progress)


# How long a job waits for a worker with the resources it asks for to join.
RESOURCES_WAIT_SECONDS = 60.0


class NoWorkerError(AesclError, LookupError):
    """No worker of the cluster has the resources the job asks for, and none with them
    joined within the wait."""


def check_address(address: str) -> None:
    """Raise ValueError, naming ``address``, unless it is a scheduler address Dask can
    use (``tcp://host:port``, ``tls://...``; a bare ``host:port`` means tcp)."""
    from distributed.comm import get_address_host_port, parse_address
    from distributed.comm.registry import get_backend

    try:
        if not address.strip():
            raise ValueError("it is empty")
        scheme, _ = parse_address(address)
        get_backend(scheme)
        if scheme in ("tcp", "tls"):
            get_address_host_port(address)
    except ValueError as exc:
        raise ValueError(f"invalid Dask scheduler address {address!r}: {exc}") from None


def _has(worker: dict[str, Any], resources: dict[str, float]) -> bool:
    have = worker.get("resources") or {}
    return all(have.get(name, 0) >= amount for name, amount in resources.items())


def wait_for_resources(client: Client, resources: dict[str, float] | None,
                       seconds: float = RESOURCES_WAIT_SECONDS) -> None:
    """Return once a worker has ``resources``; raise :class:`NoWorkerError` if none
    has them after ``seconds`` (Dask itself would hold the tasks forever)."""
    if not seconds >= 0:  # (NaN included)
        raise ValueError(f"resources_wait must be a number of seconds >= 0, not {seconds!r}")
    if not resources:
        return
    deadline = time.monotonic() + seconds
    while not any(_has(worker, resources)
                  for worker in client.scheduler_info(n_workers=-1)["workers"].values()):
        if time.monotonic() >= deadline:
            wanted = ", ".join(f"{name}={amount:g}" for name, amount in resources.items())
            raise NoWorkerError(f"no worker has the resources {wanted} (waited {seconds:g} s "
                                "for one to join); nothing was written")
        time.sleep(min(0.5, seconds))


def _run_task(task: Task) -> int:
    return task()


class PartsOfALostClient(SchedulerPlugin):
    """Runs on the scheduler: if the client of a job goes away before publishing its
    outputs (a ``kill -9``, a lost machine), removes the job's part files. A client
    that ends normally has published or removed them itself, and takes the plugin
    back. The scheduler must see the files under the same names, and import aescl."""

    def __init__(self, client_id: str, parts: list[str]) -> None:
        self.client_id = client_id
        self.parts = parts

    def remove_client(self, scheduler: Any, client: str) -> None:
        if client != self.client_id:
            return
        for url in self.parts:
            with contextlib.suppress(Exception):  # (what cannot be removed, stays)
                Location(url).remove()


def run(client: Client, plan: Plan, resources: dict[str, float] | None = None,
        progress: Progress | None = None,
        resources_wait: float = RESOURCES_WAIT_SECONDS) -> list[str]:
    """Run a planned job's tasks on the cluster, then publish its outputs; on any
    failure cancel what is left, remove every part and raise the task's error. With
    ``resources``, a worker that has them must be there, or join within
    ``resources_wait`` seconds (:class:`NoWorkerError`). Should this process die
    meanwhile, the scheduler removes the parts (:class:`PartsOfALostClient`)."""
    job = secrets.token_hex(6)
    guard = f"aescl-parts-{job}"
    try:
        guarded = _guard_parts(client, plan, guard)
        wait_for_resources(client, resources, resources_wait)
    except BaseException:
        plan.discard()
        raise
    # Named keys: Dask would otherwise hash the arguments, keys included, into the name.
    futures: list[Any] = [
        client.submit(_run_task, task, key=f"aescl-{job}-{index}", resources=resources,
                      pure=False)
        for index, task in enumerate(plan.tasks)
    ]
    try:
        for future in as_completed(futures):
            done = future.result()
            if progress:
                progress(done)
        return plan.publish()
    except BaseException:
        client.cancel(futures)
        plan.discard()
        raise
    finally:
        if guarded:
            with contextlib.suppress(Exception):
                client.unregister_scheduler_plugin(guard)


def _guard_parts(client: Client, plan: Plan, name: str) -> bool:
    """Register :class:`PartsOfALostClient` for the plan's parts; False where the
    scheduler cannot take it (it lacks aescl): the job runs, unguarded, with a warning."""
    parts = [part.url for part, _ in plan.outputs]
    try:
        client.register_plugin(PartsOfALostClient(client.id, parts), name=name)
    except Exception as exc:
        warnings.warn(f"the Dask scheduler could not take aescl's clean-up plugin ({exc}); "
                      "if this process is killed, the job's .aescl-part files stay",
                      RuntimeWarning, stacklevel=3)
        return False
    return True
