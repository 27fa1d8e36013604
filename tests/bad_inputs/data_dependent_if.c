// expect: data-dependent condition
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    if (a[i] > 0) // <- error
      a[i] = 0;
#pragma endscop
}
