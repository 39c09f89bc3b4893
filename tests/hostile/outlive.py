# A daemon that tries to outlive the run: double fork, setsid, ignore SIGTERM/SIGHUP.
import os, signal, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        time.sleep(60)
        os._exit(0)
    os._exit(0)
os.wait()
print("bye")
