// expect: address-of
void f(int n, float a[n], float b[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    b[i] = &a[i] - &a[0]; // <- error
#pragma endscop
}
