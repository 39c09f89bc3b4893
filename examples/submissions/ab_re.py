# Raises: a traceback on stderr, exit code 1, RE.
a, b = map(int, input().split())
raise ValueError("no sum today")
