"""Time whole `aescl encrypt` runs of one file on the default device and named ones,
alternating, in fresh processes; print which device the default picks."""
import subprocess, sys, time

rounds = int(sys.argv[1])
src = "/dev/shm/big.bin"
choice = subprocess.run([sys.executable, "-c",
    "from aescl import teams; from aescl.devices import opencl_started\n"
    "d = teams.team(None).for_job(4 << 30, 'chunks', file_job=True).devices[0]\n"
    "print(d.id, d.name, '(OpenCL started to choose:', opencl_started(), ')')"],
    capture_output=True, text=True)
print("default choice for this 4 GiB file job:", choice.stdout.strip(), choice.stderr.strip()[-300:])
for r in range(rounds):
    row = []
    for label, extra in (("default", []), ("host", ["--device", "host"]), ("nvidia", ["--device", "nvidia"])):
        start = time.perf_counter()
        done = subprocess.run(["aescl", "encrypt", "--key-file", "/dev/shm/k.key", "-f", "-o",
                               "/dev/shm/out.aescl", *extra, src], capture_output=True, text=True)
        row.append(f"{label} {time.perf_counter() - start:.2f} s (rc {done.returncode})")
        if done.returncode:
            print(done.stderr[-500:])
    print(f"round {r}: " + ", ".join(row), flush=True)
