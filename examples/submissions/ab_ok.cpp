// A+B in C++17: AC.
#include <iostream>

int main() {
    std::ios::sync_with_stdio(false);
    long long a, b;
    std::cin >> a >> b;
    std::cout << a + b << '\n';
}
