# Writes to kernel knobs.
def writable(path):
    try:
        with open(path, "w") as f:
            f.write("x")
        return True
    except OSError:
        return False


knobs = ["/proc/sysrq-trigger", "/proc/sys/kernel/hostname", "/sys/kernel/mm/transparent_hugepage/enabled"]
wrote = [p for p in knobs if writable(p)]
print("wrote " + " ".join(wrote) if wrote else "blocked")
