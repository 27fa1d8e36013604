// expect: non-affine expression (i * j)
void f(int n, float a[n][n], float x[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      x[i * j] = a[i][j]; // <- error
#pragma endscop
}
