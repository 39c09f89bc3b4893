import sys
while True:
    sys.stderr.write("x" * 4096)
