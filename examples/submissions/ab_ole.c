/* Prints forever: OLE once stdout reaches the output limit. */
#include <stdio.h>

int main(void) {
    for (;;) fputs("the same line, again and again and again\n", stdout);
    return 0;
}
