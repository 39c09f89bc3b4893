// A special judge that always fails (testlib's _fail): the judge's fault, JE.
#include <cstdio>
int main() {
    std::fprintf(stderr, "FAIL the checker itself is broken\n");
    return 3;
}
