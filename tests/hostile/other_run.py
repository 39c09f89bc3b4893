# Reads another run's files: the path (on the host) comes on stdin.
path = input().strip()
try:
    print("read " + open(path).read())
except OSError:
    print("blocked")
