import json, sys, traceback, os
sys.path.insert(0, "/tmp/old")
os.environ.setdefault("SGLANG_DISABLE_CUDA_CHECK", "1")
import triton.runtime.cache as _c
for _n in ("default_cache_dir", "default_dump_dir", "default_override_dir"):
    if not hasattr(_c, _n):
        setattr(_c, _n, lambda: "/root/tc")
from sglang.srt.server_args import prepare_server_args
M = "/tmp/models/Llama-3.1-8B-Instruct"
CASES = json.load(open("/tmp/old-cases.json"))
name = sys.argv[1]
argv = ["--model-path", M, "--device", "cuda"] + CASES[name]
try:
    args = prepare_server_args(argv)
    args.check_server_args()  # what engine.py runs next, before any GPU work
    print("PREFLIGHT OK")
except SystemExit as e:
    print(f"SystemExit {e.code}")
except BaseException:
    traceback.print_exc()
