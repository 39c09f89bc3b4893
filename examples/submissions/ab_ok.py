# A+B in Python 3: AC.
a, b = map(int, input().split())
print(a + b)
