# Grows a list of fresh 1 MiB byte strings to 512 MiB under a 64 MiB limit: MLE.
a, b = map(int, input().split())
keep = [bytes([i % 256]) * (1 << 20) for i in range(512)]
print(a + b)
