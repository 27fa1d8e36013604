// expect: unknown variable 'q'
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = q + 1; // <- error
#pragma endscop
}
