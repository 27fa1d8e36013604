/* Probe input: kernels/batched_cholesky.c without its two substitutions (the factor's
   share of the time). */
void batched_cholesky(int nb, int n, float a[nb][n][n], float b[nb][n])
{
#pragma scop
  for (int e = 0; e < nb; e++) {
    for (int k = 0; k < n; k++) {
      a[e][k][k] = sqrtf(a[e][k][k] + 2.0f * n);
      for (int i = k + 1; i < n; i++)
        a[e][i][k] = a[e][i][k] / a[e][k][k];
      for (int i = k + 1; i < n; i++)
        for (int j = k + 1; j <= i; j++)
          a[e][i][j] -= a[e][i][k] * a[e][j][k];
    }
  }
#pragma endscop
}
