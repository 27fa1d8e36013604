// expect: #pragma scop without a matching #pragma endscop
void f(int n, float a[n])
{
#pragma scop // <- error
  for (int i = 0; i < n; i++)
    a[i] = 0;
}
