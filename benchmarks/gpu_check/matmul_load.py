"""Load one GPU with a bf16 matrix-multiply loop and say when, and with how much memory.

Runs as its own process (as a real server would be) so that the sampler watches a GPU that
another program is loading. Holds a ballast allocation so that `memory.used` moves by a
known amount, and writes the load's timeline and torch's own view of the memory as JSON.

Usage: python3 matmul_load.py --seconds 30 --ballast-gib 40 --out load.json
"""

from __future__ import annotations

import argparse
import json
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--ballast-gib", type=float, default=40.0)
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    record: dict = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "started": time.time()}
    ballast = torch.zeros(int(args.ballast_gib * (1 << 30)), dtype=torch.uint8, device="cuda")
    a = torch.randn(args.size, args.size, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(args.size, args.size, dtype=torch.bfloat16, device="cuda")
    for _ in range(20):  # warm-up: cuBLAS picks its kernel, clocks ramp
        c = a @ b
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    record.update(
        ballast_bytes=ballast.numel(),
        torch_allocated=torch.cuda.memory_allocated(),
        torch_reserved=torch.cuda.memory_reserved(),
        cuda_free=free,
        cuda_total=total,
        cuda_used_mib=(total - free) / (1 << 20),
    )
    record["load_start"] = start = time.time()
    print(json.dumps({"event": "load_start", "time": start}), flush=True)
    n = 0
    while time.time() - start < args.seconds:
        for _ in range(50):
            c = a @ b
        torch.cuda.synchronize()
        n += 50
    record["load_end"] = end = time.time()
    record["matmuls"] = n
    record["tflops"] = 2 * args.size**3 * n / (end - start) / 1e12
    del a, b, c, ballast
    torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump(record, f, indent=2)
    print(json.dumps(record))


if __name__ == "__main__":
    main()
