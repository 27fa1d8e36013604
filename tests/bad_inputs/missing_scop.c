// expect: no #pragma scop
void f(int n, float a[n]) // <- error
{
  for (int i = 0; i < n; i++)
    a[i] = 0;
}
