/* atax: y = A^T (A x) with A m x n.  The first product reads A by rows, the second
   by columns, and the second needs all of tmp: two nests with a global dependence
   between them, the second a transposed matrix-vector product (tmv). */
void atax(int m, int n, float a[m][n], float x[n], float y[n], float tmp[m])
{
#pragma scop
  for (int i = 0; i < m; i++) {
    tmp[i] = 0.0f;
    for (int j = 0; j < n; j++)
      tmp[i] += a[i][j] * x[j];
  }
  for (int j = 0; j < n; j++) {
    y[j] = 0.0f;
    for (int i = 0; i < m; i++)
      y[j] += a[i][j] * tmp[i];
  }
#pragma endscop
}
