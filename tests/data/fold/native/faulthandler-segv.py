import faulthandler, os, signal, threading, time
import torch
faulthandler.enable()
def worker():
    while True:
        time.sleep(0.1)
def event_loop_overlap():
    x = torch.ones(4)
    threading.Thread(target=worker, daemon=True, name="watchdog").start()
    time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGSEGV)
event_loop_overlap()
