# Connects to a port the test listens on (host loopback): the run has its
# own network namespace, with no interface up.
import socket
port = int(input())
try:
    s = socket.create_connection(("127.0.0.1", port), timeout=1)
    s.sendall(b"escaped\n")
    print("connected")
except OSError:
    print("blocked")
