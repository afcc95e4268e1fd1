"""Issue 57, item 1: the chunked format's piece size on ordinary and pinned memory. The
first OpenCL GPU and ``cuda:0`` seal and open 2 GiB ($PROBE_MIB) with ``batch_chunks``
1024 (the API's default: 16 MiB pieces on the OpenCL engine), 2048 and 4096 (the CUDA
engine's pieces are its own, 32 MiB, whatever is asked); best of 3 after a warm-up,
GB/s. Prints one line a row: device, memory, batch_chunks, [seal, open].

    python3 docs/benchmarks/2026-12-01-opencl-batch-chunks.py
"""

from __future__ import annotations

from one_gpu_jobs import OrdinaryJobs, PinnedJobs, best, first_device


def main() -> None:
    for spec in (first_device("opencl"), "cuda:0"):
        for memory, make in (("ordinary", OrdinaryJobs), ("pinned", PinnedJobs)):
            data = make(spec)
            for batch in (1024, 2048, 4096):
                rates = [data.gb_s(best(lambda d=data, b=batch: d.seal(b))),
                         data.gb_s(best(lambda d=data, b=batch: d.open(b)))]
                print(spec, memory, batch, rates, flush=True)
            assert data.opened_intact()
            del data


if __name__ == "__main__":
    main()
