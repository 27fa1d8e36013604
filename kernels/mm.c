/* mm: matrix multiply c += a b (Baskaran et al. 2008). */
void mm(int n, float a[n][n], float b[n][n], float c[n][n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      for (int k = 0; k < n; k++)
        c[i][j] += a[i][k] * b[k][j];
#pragma endscop
}
