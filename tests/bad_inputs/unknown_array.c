// expect: unknown array 'z'
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = z[i]; // <- error
#pragma endscop
}
