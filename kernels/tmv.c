/* tmv: transposed matrix-vector multiply x = A^T y (Baskaran et al. 2008). */
void tmv(int n, float a[n][n], float x[n], float y[n])
{
#pragma scop
  for (int i = 0; i < n; i++) {
    x[i] = 0;
    for (int j = 0; j < n; j++)
      x[i] += a[j][i] * y[j];
  }
#pragma endscop
}
