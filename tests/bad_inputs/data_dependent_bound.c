// expect: i < x[0]: data-dependent loop bound
void f(int n, float a[n], int x[n])
{
#pragma scop
  for (int i = 0; i < x[0]; i++) // <- error
    a[i] = 0;
#pragma endscop
}
