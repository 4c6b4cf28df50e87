"""Real CUDA failures for the fold's fixtures: each case in its own process, stdout+stderr kept."""
import subprocess, sys, os
OUT = os.environ["OUT"]
CASES = {
    "index-assert": "import torch\nx = torch.zeros(4, device='cuda')\ni = torch.tensor([10], device='cuda')\ny = x[i]\ntorch.cuda.synchronize()\n",
    "illegal-address": (
        "import cupy, torch, faulthandler\nfaulthandler.enable()\n"
        "k = cupy.RawKernel(r'''extern \"C\" __global__ void poke(unsigned long long a){ *((int*)a) = 1; }''', 'poke')\n"
        "k((1,), (1,), (cupy.uint64(0xdeadbeef000),))\n"
        "x = torch.ones(8, device='cuda')\n"
        "print((x * 2).sum().item())\n"
    ),
    "illegal-address-thread": (
        "import cupy, torch, threading, time\n"
        "x = torch.ones(8, device='cuda')\n"
        "k = cupy.RawKernel(r'''extern \"C\" __global__ void poke(unsigned long long a){ *((int*)a) = 1; }''', 'poke')\n"
        "def worker():\n    torch.cuda.set_device(0)\n    k((1,), (1,), (cupy.uint64(0xdeadbeef000),))\n    torch.cuda.synchronize()\n"
        "t = threading.Thread(target=worker); t.start(); t.join()\n"
        "del x\n"
    ),
}
for name, code in CASES.items():
    p = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True, timeout=120)
    with open(f"{OUT}/{name}.txt", "w") as f:
        f.write(p.stdout + p.stderr)
    print(f"== {name} rc={p.returncode}\n{(p.stdout + p.stderr)[-1500:]}")
