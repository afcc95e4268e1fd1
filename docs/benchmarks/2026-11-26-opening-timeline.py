"""Every command of a pyopencl opening on the device's clock (1 GiB, output=), in aescl's
own context, whose queue profiles, so that each command's event has its times: per
call, each command's host enqueue time from the call's start and its device start and
end from the previous call's last command's end (µs). The barrier has no times (NVIDIA).
SIZE and VENDOR (nvidia; pocl to try it on a CPU) pick the message and the device;
WITH_TORCH=1 makes a torch CUDA context first.
"""
import os, sys, time
import numpy as np
import pyopencl as cl, pyopencl.array as cla, pyopencl.tools as clt
import aescl
from aescl.engines.opencl import runtime as opencl_runtime
if os.environ.get("WITH_TORCH"):
    import torch
    torch.zeros(1, device="cuda")
SIZE = int(os.environ.get("SIZE", 1 << 30))
nvidia = next(d for d in aescl.devices() if d.is_opencl and d.vendor == os.environ.get("VENDOR", "nvidia"))
rt = opencl_runtime.device_runtime(nvidia)
queue = cl.CommandQueue(rt.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
pool = clt.MemoryPool(clt.ImmediateAllocator(queue))
message = cla.to_device(queue, np.frombuffer(os.urandom(SIZE), np.uint8), allocator=pool)
key = os.urandom(32)
sealed = aescl.chunked.encrypt(key, message)
opened = aescl.chunked.decrypt(key, sealed)
assert (opened.get() == message.get()).all()
log = []
def wrap(name):
    orig = getattr(cl, name)
    def w(*a, **k):
        t = time.perf_counter()
        ev = orig(*a, **k)
        if name == "enqueue_nd_range_kernel":
            label = a[1].function_name
        else:
            label = name.replace("enqueue_", "")
        log.append((label, ev, t))
        return ev
    setattr(cl, name, w)
for n in ("enqueue_nd_range_kernel", "enqueue_copy", "enqueue_fill_buffer", "enqueue_marker", "enqueue_barrier"):
    wrap(n)
calls = []
for i in range(8):
    log.clear()
    t0 = time.perf_counter()
    aescl.chunked.decrypt(key, sealed, output=opened)
    t1 = time.perf_counter()
    calls.append((t0, t1, list(log)))
queue.finish(); rt.queue.finish()
prev_end = None
for i, (t0, t1, cmds) in enumerate(calls):
    big = [c for c in cmds if c[0] == "gcm_crypt_hash"][0]
    rows = []
    for label, ev, t in cmds:
        try:
            s, e = ev.profile.start, ev.profile.end
        except Exception:
            s = e = None
        rows.append((label, s, e, t))
    if i >= 2:
        print(f"call {i}: host {1e6*(t1-t0):.0f} us; big kernel {(big[1].profile.end-big[1].profile.start)/1e3:.0f} us; host enqueue of big at +{1e6*(big[2]-t0):.0f} us")
        for label, s, e, t in rows:
            rel = lambda x: None if x is None or prev_end is None else round((x - prev_end) / 1e3, 1)
            print(f"   {label:28s} host +{1e6*(t-t0):7.1f}  dev start {rel(s)}  end {rel(e)}")
    prev_end = big[1].profile.end
    # next call's idle is measured from the end of this call's last command
    last = max((r[2] for r in rows if r[2] is not None), default=None)
    if last is not None:
        prev_end = last
