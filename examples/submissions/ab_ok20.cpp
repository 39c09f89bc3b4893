// A+B in C++20 (concepts, ranges): AC.
#include <concepts>
#include <iostream>
#include <numeric>
#include <ranges>
#include <vector>

template <std::integral T>
T sum(const std::vector<T>& xs) {
    return std::accumulate(xs.begin(), xs.end(), T{0});
}

int main() {
    std::vector<long long> xs(2);
    for (auto& x : xs) std::cin >> x;
    std::cout << sum(xs) << '\n';
}
