// expect: duplicate parameter 'n'
void f(int n,
       float a[n],
       int n) // <- error
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = 0;
#pragma endscop
}
