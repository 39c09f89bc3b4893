# Tries to leave the OOM killer's first place (the sandbox helper, in the
# same memory cgroup, would then be picked before it): /proc is read-only
# in the jail, and the score every run's process has is 1000.
try:
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("0")
    print("lowered")
except OSError:
    print("blocked")
with open("/proc/self/oom_score_adj") as f:
    print(f.read().strip())
