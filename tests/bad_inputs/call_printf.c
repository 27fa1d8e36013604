// expect: call to 'printf': only pure math functions are allowed (a call may have side effects)
#include <stdio.h>
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    printf("%f\n", a[i]); // <- error
#pragma endscop
}
