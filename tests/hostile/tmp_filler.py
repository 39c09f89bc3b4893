# Fills /tmp 1 MiB at a time, in many files (each file is also capped by the
# output limit): /tmp is a tmpfs capped at the memory limit, and its pages
# are the run's memory: MLE.
block = b"x" * (1 << 20)
n = 0
try:
    while True:
        with open("/tmp/fill%d" % n, "wb") as f:
            f.write(block)
        n += 1
except OSError:
    pass
print("wrote", n)
