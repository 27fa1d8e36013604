// expect: syntax error
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = a[i] + ; // <- error
#pragma endscop
}
