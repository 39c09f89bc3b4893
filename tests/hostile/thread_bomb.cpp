// Threads that never end, created until creation fails, then spin: TLE.
#include <thread>
#include <vector>
#include <chrono>
int main() {
    std::vector<std::thread> ts;
    for (;;) {
        try { ts.emplace_back([] { for (;;) std::this_thread::sleep_for(std::chrono::seconds(1)); }); }
        catch (...) { for (volatile long i = 0;; i++) {} }
    }
}
