"""MODE_GCM on one 1 GiB torch tensor through the CUDA engine (2026-11-25, H100).

Per key size: encrypt + digest into output=, and decrypt_and_verify into a new tensor,
each message a new cipher with a new nonce under one key; then the same with a new key
every message (its GHASH tables made anew). Best of three rounds of 3 messages, the GPU
synchronized at each round's end; GB/s of text. Then small calls: a 4 KiB CTR call
against torch.bitwise_xor on the same tensor (2,000 calls), and a 4 KiB GCM message
(500), synchronized at the end. Prints JSON; writes it to $OUT/gcm_one_message.json.
"""
import json
import os
import time

import torch

import aescl

SIZE = 1 << 30


def best_seconds(work, calls):
    """Seconds a call, best of three rounds of ``calls``, the GPU synchronized at each
    round's end (after one call to warm up)."""
    work()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            work()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def rate(work):
    return round(SIZE / best_seconds(work, 3) / 1e9, 1)


def per_call_us(work, calls):
    return round(best_seconds(work, calls) * 1e6, 2)


def one_message(bits, results):
    key = os.urandom(bits // 8)
    text = torch.randint(0, 256, (SIZE,), dtype=torch.uint8, device="cuda")
    out = torch.empty_like(text)
    nonce = os.urandom(12)
    sealer = aescl.new(key, aescl.MODE_GCM, nonce=nonce)
    sealed = sealer.encrypt(text)
    tag = sealer.digest()

    def seal(key=key):
        cipher = aescl.new(key, aescl.MODE_GCM, nonce=os.urandom(12))
        cipher.encrypt(text, output=out)
        cipher.digest()

    def open_():
        aescl.new(key, aescl.MODE_GCM, nonce=nonce).decrypt_and_verify(sealed, tag)

    results[f"GCM-{bits} encrypt+digest GB/s"] = [rate(seal) for _ in range(2)]
    results[f"GCM-{bits} decrypt_and_verify GB/s"] = [rate(open_) for _ in range(2)]
    results[f"GCM-{bits} encrypt+digest, a new key every message GB/s"] = [
        rate(lambda: seal(os.urandom(bits // 8))) for _ in range(2)]
    print(json.dumps(results), flush=True)


results = {}
for bits in (128, 256):
    one_message(bits, results)

small = torch.randint(0, 256, (4096,), dtype=torch.uint8, device="cuda")
other = torch.empty_like(small)
key = os.urandom(16)
ctr = aescl.new(key, aescl.MODE_CTR, nonce=os.urandom(8))


def small_message():
    cipher = aescl.new(key, aescl.MODE_GCM, nonce=os.urandom(12))
    cipher.encrypt(small, output=other)
    cipher.digest()


results["4 KiB CTR call us"] = per_call_us(lambda: ctr.encrypt(small, output=other), 2000)
results["4 KiB torch.bitwise_xor us"] = per_call_us(
    lambda: torch.bitwise_xor(small, small, out=other), 2000)
results["4 KiB GCM message us"] = per_call_us(small_message, 500)
print(json.dumps(results, indent=1), flush=True)
with open(os.path.join(os.environ.get("OUT", "."), "gcm_one_message.json"), "w") as sink:
    json.dump(results, sink, indent=1)
