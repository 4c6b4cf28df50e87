"""Each flag set through SGLang 0.5.23's own argument parsing and resolution; the traceback printed."""
import json, sys, traceback, os
os.environ.setdefault("SGLANG_DISABLE_CUDA_CHECK", "1")
from sglang.srt.server_args import prepare_server_args
M = "/tmp/models/Llama-3.1-8B-Instruct"
D = "/tmp/models/EAGLE3-LLaMA3.1-Instruct-8B"
CASES = json.load(open("/tmp/cases.json"))
name = sys.argv[1]
argv = ["--model-path", M, "--device", "cuda"] + CASES[name]
try:
    args = prepare_server_args(argv)
    if hasattr(args, "resolve_once"):
        args.resolve_once()
    print("PREFLIGHT OK")
except SystemExit as e:
    print(f"SystemExit {e.code}")
except BaseException:
    traceback.print_exc()
