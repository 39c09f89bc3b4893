# Fills /dev/shm (POSIX shared memory) 1 MiB at a time: it shares /tmp's
# cap, and its pages are the run's memory: MLE.
import os
block = b"x" * (1 << 20)
n = 0
try:
    while True:
        fd = os.open("/dev/shm/fill%d" % n, os.O_CREAT | os.O_WRONLY, 0o600)
        os.write(fd, block)
        os.close(fd)
        n += 1
except OSError:
    pass
print("wrote", n)
