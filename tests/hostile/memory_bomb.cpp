// A vector that doubles forever: MLE.
#include <vector>
int main() { std::vector<long> v; for (long i = 0;; i++) v.push_back(i); }
