# Runs set-uid root programs: nosuid mounts and no_new_privs keep it unprivileged.
import os, subprocess
out = subprocess.run(["/usr/bin/su", "-c", "id -u", "root"], stdin=subprocess.DEVNULL,
                     capture_output=True, text=True)
print("root" if out.stdout.strip() == "0" else "blocked")
print("euid", os.geteuid() != 0)
