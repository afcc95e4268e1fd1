"""Options and argument checks that several commands share."""

from __future__ import annotations

import os
import stat

import click

import aescl

from .exits import STDIO, Refusal


def existing_inputs(ctx, param, values: tuple[str, ...]) -> tuple[str, ...]:
    """Local inputs must exist and be files; URLs are checked where they are read."""
    for value in values:
        if value == STDIO or not is_local(value):
            continue
        try:
            status = os.stat(local_path(value))
        except FileNotFoundError:
            raise click.BadParameter(f"{value} does not exist", ctx, param) from None
        except OSError as exc:  # a name too long, a loop of links, no permission, ...
            raise click.BadParameter(f"{value}: {exc.strerror or exc}", ctx, param) from None
        if stat.S_ISDIR(status.st_mode):
            raise click.BadParameter(f"{value} is a directory", ctx, param)
    return values


def device_specs(ctx, param, values: tuple[str, ...]) -> tuple[str, ...]:
    """--device: every spec names something (an empty one would mean the default)."""
    for value in values:
        if not value.strip():
            raise click.BadParameter("an empty spec; name a device (aescl devices lists "
                                     "them) or say all", ctx, param)
    return values


def is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def local_path(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def chosen_device(specs: tuple[str, ...]) -> list[aescl.Device | str] | None:
    """The devices of --device (repeated, or ``all``); none given: $AESCL_DEVICE, else
    None, for the library's default (a small job then never starts OpenCL). The specs
    are checked here and passed on as given, so that ``all`` keeps its meaning."""
    if not specs and not os.environ.get("AESCL_DEVICE"):
        return None
    if [spec.strip().lower() for spec in specs] == ["all"]:
        return list(specs)  # (always something: listing it would start every device)
    try:
        found = aescl.teams.resolve_devices(list(specs) if specs else None)
    except aescl.DeviceNotFound as exc:
        raise Refusal(str(exc)) from None
    return list(specs) if specs else list(found)
