#!/bin/sh
# Set aescl up from this checkout and run it: README's two commands.
#
#   sh setup.sh        installs what is missing (the OpenCL CPU runtime only if no OpenCL
#                      device is found), makes .venv, installs aescl into it, lists the
#                      devices and encrypts and decrypts a sample file
#   sh setup.sh test   the same set-up with the test extras, then the whole test suite
#
# Debian or Ubuntu, as root or with sudo for the system packages. Safe to run again:
# each step is skipped when what it makes is already there (pip reinstalls aescl).
set -eu
cd "$(dirname "$0")"
what="${1:-demo}"
case "$what" in
    demo | test) ;;
    *) echo "usage: sh setup.sh [test]" >&2; exit 2 ;;
esac

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# System packages: only those missing, and the package lists fetched only then.
install_packages() {
    missing=""
    for package in "$@"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing="$missing $package"
    done
    if [ -n "$missing" ]; then
        echo "setup: installing$missing"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
        # shellcheck disable=SC2086
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >/dev/null
    fi
}

# Python with venv (Debian splits ensurepip into python3-venv).
if ! command -v python3 >/dev/null 2>&1 || ! python3 -c "import ensurepip" 2>/dev/null; then
    install_packages python3 python3-venv
fi
if [ "$what" = test ]; then
    # The suite runs its device tests on the CPU runtime and its interop tests on
    # openssl, and builds every GPU kernel for AMD and SPIR targets with clang.
    install_packages pocl-opencl-icd openssl clang-16 rocm-device-libs
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
. .venv/bin/activate
if [ "$what" = test ]; then
    pip install -q '.[test]'
    # One worker per CPU (pytest-xdist), at most 8: on the 2-core CI kind, from a fresh
    # clone, the suite took 13-14 minutes one test at a time and 8-8.5 in two workers
    # (2026-11-26; docs/benchmarks/README.md, "The suite on the CI kind").
    exec pytest -n auto --maxprocesses 8
fi
pip install -q .

# The best OpenCL device that is not a simulator (drivers installed but unregistered
# count: aescl registers them itself), or nothing.
best_opencl_device() {
    python3 -c "
import aescl
from aescl.devices import select
real = [d for d in aescl.devices() if d.is_opencl and not d.is_simulator]
print(select(None, real).id if real else '')"
}
device="$(best_opencl_device)"
if [ -z "$device" ]; then  # the OpenCL CPU runtime, then
    install_packages pocl-opencl-icd
    device="$(best_opencl_device)"
fi

aescl devices
sample="$(mktemp -d)"
trap 'rm -rf "$sample"' EXIT
head -c 1000000 /dev/urandom > "$sample/sample.bin"
aescl keygen -o "$sample/sample.key"
aescl encrypt --key-file "$sample/sample.key" "$sample/sample.bin"
aescl decrypt --key-file "$sample/sample.key" --device "${device:-host}" \
    -o "$sample/back.bin" "$sample/sample.bin.aescl"
cmp "$sample/sample.bin" "$sample/back.bin"
echo "setup: encrypted a 1 MB sample file (on the default device: the host engine, for" \
     "a file this small) and decrypted it on ${device:-host}; the round trip is exact."
echo "setup: now run '. .venv/bin/activate' and then 'aescl --help'."
