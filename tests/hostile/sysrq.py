# Writes to kernel knobs.
wrote = []
for p in ["/proc/sysrq-trigger", "/proc/sys/kernel/hostname", "/sys/kernel/mm/transparent_hugepage/enabled"]:
    try:
        with open(p, "w") as f:
            f.write("x")
        wrote.append(p)
    except OSError:
        pass
print("wrote " + " ".join(wrote) if wrote else "blocked")
