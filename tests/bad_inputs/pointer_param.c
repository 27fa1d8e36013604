// expect: pointer parameter 'a': declare arrays with C99 extents, e.g. float a[n][m]
void f(int n,
       float *a, // <- error
       float b[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    b[i] = a[i];
#pragma endscop
}
