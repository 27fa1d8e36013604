// expect: comma expression
void f(int n, float a[n], float b[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = (b[i], 0); // <- error
#pragma endscop
}
