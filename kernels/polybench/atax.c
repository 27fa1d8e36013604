/* PolyBench/C 4.2.1 atax, as written there: y is accumulated row by row inside the
   loop that computes tmp. */
void atax(int m, int n, double A[m][n], double x[n], double y[n], double tmp[m])
{
#pragma scop
  for (int i = 0; i < n; i++)
    y[i] = 0;
  for (int i = 0; i < m; i++) {
    tmp[i] = 0.0;
    for (int j = 0; j < n; j++)
      tmp[i] = tmp[i] + A[i][j] * x[j];
    for (int j = 0; j < n; j++)
      y[j] = y[j] + A[i][j] * tmp[i];
  }
#pragma endscop
}
