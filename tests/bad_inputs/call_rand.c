// expect: call to 'rand': only pure math functions are allowed
#include <stdlib.h>
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = rand(); // <- error
#pragma endscop
}
