/* Not an MPI program at all: preloading the interposer must change nothing. */
#include <stdio.h>

int main(void)
{
    printf("plain program\n");
    return 5;
}
