/* PolyBench/C 4.2.1 trmm, as written there: B := alpha*A^T*B with A unit lower
   triangular, in place: row i of B reads the rows k > i, not yet updated. */
void trmm(int m, int n, double alpha, double A[m][m], double B[m][n])
{
#pragma scop
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      for (int k = i + 1; k < m; k++)
        B[i][j] += A[k][i] * B[k][j];
      B[i][j] = alpha * B[i][j];
    }
#pragma endscop
}
