#!/bin/bash
# Issue 57 on a host of several GPUs: the measurements still owed after the seventeenth
# session (docs/benchmarks/README.md, "Where issue 57 stands"), in parts that each fit
# one call of the GPU machine (10 minutes). Run from docs/benchmarks with aescl
# installed; each part writes JSON (and the bench's plot) under $OUT (default: here).
#
#   bash 2026-12-02-several-gpus.sh teams      # pinned: 1, 2 and every GPU, 2 and 4 GiB
#   bash 2026-12-02-several-gpus.sh ordinary   # ordinary memory: each engine's team, all
#   bash 2026-12-02-several-gpus.sh bench      # aescl bench: each GPU, the team, --processes
#   bash 2026-12-02-several-gpus.sh files      # 4 GiB in 5 rounds, 16 GiB in 2
#
# The GPU suite and the CUDA two-GPU thread test run from a copy of tests/ (DEVICE.md):
#   AESCL_TEST_DEVICES=nvidia python3 -m pytest -q -n 8 -rfE tests
#   AESCL_TEST_DEVICES=nvidia python3 -m pytest -q -rs tests/test_engine_cuda_arrays.py \
#       -k threads_a_gpu_each
set -eu
OUT=${OUT:-.}
LABEL=${LABEL:-$(git rev-parse --short HEAD 2>/dev/null || echo installed)}
cuda_gpus() { python3 -c 'import aescl; print(" ".join(d.id for d in aescl.devices() if d.is_cuda))'; }

case "${1:-}" in
teams)
  # (each: one GPU, the team, all, and the N-process yardstick, both engines)
  for gib in 2 4; do
    TEAM_GIB=$gib timeout 200 python3 2026-11-27-gpu-team.py > "$OUT/teams-all-gpus-${gib}g.json"
  done
  # Two GPUs of the host: both engines see only what CUDA_VISIBLE_DEVICES leaves them.
  CUDA_VISIBLE_DEVICES=0,1 TEAM_GIB=2 timeout 150 python3 2026-11-27-gpu-team.py \
    > "$OUT/teams-2-gpus-2g.json"
  ;;
ordinary)
  for engine in cuda opencl all; do
    timeout 180 python3 2026-12-01-team-ordinary.py "$LABEL" "$engine" \
      > "$OUT/team-ordinary-$engine.json"
  done
  ;;
bench)
  devices=()
  for id in $(cuda_gpus); do devices+=(--device "$id"); done
  timeout 540 aescl bench "${devices[@]}" --device host --mode ctr --mode gcm-chunked \
    --key-bits 128 --key-bits 256 --sizes 256M,1G --processes --no-host --json \
    --plot "$OUT/bench-team.png" > "$OUT/bench-team.json"
  ;;
files)
  timeout 280 python3 2026-11-28-file-medians.py 4 5 > "$OUT/file-medians-4g.json"
  timeout 300 python3 2026-11-28-file-medians.py 16 2 --few > "$OUT/file-medians-16g.json"
  ;;
*)
  sed -n '2,15p' "$0"
  exit 2
  ;;
esac
