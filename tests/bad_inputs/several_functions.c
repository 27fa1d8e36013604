// expect: several functions have a #pragma scop (f, g): choose one with --function
void f(int n, float a[n]) // <- error
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = 0;
#pragma endscop
}

void g(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = 1;
#pragma endscop
}
