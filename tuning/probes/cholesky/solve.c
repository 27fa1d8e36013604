/* Probe input: kernels/batched_cholesky.c's two substitutions alone, on a given factor
   (the solves' share of the time). */
void batched_cholesky(int nb, int n, float a[nb][n][n], float b[nb][n])
{
#pragma scop
  for (int e = 0; e < nb; e++) {
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < i; j++)
        b[e][i] -= a[e][i][j] * b[e][j];
      b[e][i] = b[e][i] / a[e][i][i];
    }
    for (int i = n - 1; i >= 0; i--) {
      for (int j = i + 1; j < n; j++)
        b[e][i] -= a[e][j][i] * b[e][j];
      b[e][i] = b[e][i] / a[e][i][i];
    }
  }
#pragma endscop
}
