// expect: No such file or directory
#include "no_such_header.h" // <- error
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = 0;
#pragma endscop
}
