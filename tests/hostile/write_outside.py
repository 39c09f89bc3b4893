# Tries to write where it must not: the host's file system, the source dir.
import os
wrote = []
for p in ["/etc/ojrunner-pwned", "/usr/ojrunner-pwned", "/ojrunner-pwned", "/dev/ojrunner-pwned",
          "/proc/ojrunner-pwned", "main.py", os.path.join(os.getcwd(), "pwned")]:
    try:
        with open(p, "a") as f:
            f.write("pwned\n")
        wrote.append(p)
    except OSError:
        pass
print("wrote " + " ".join(wrote) if wrote else "blocked")
