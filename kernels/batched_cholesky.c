/* batched_cholesky: many small independent SPD systems solved in place (seed 000's
   factorization workload): for each element e, the right-looking Cholesky factor of
   S + 2n I overwrites the lower triangle of a[e] (the shift makes any entries in
   [0.5, 1.5) positive definite, as in kernels/cholesky.c), then b[e] is overwritten by the
   solution of L L^T x = b[e]: a forward and a backward substitution. */
#ifndef DATA_TYPE
#define DATA_TYPE float
#endif
#ifndef SQRT_FUN /* sqrt with DATA_TYPE=double (sqrtf rounds to float: PolyBench's macro) */
#define SQRT_FUN sqrtf
#endif

void batched_cholesky(int nb, int n, DATA_TYPE a[nb][n][n], DATA_TYPE b[nb][n])
{
#pragma scop
  for (int e = 0; e < nb; e++) {
    for (int k = 0; k < n; k++) {
      a[e][k][k] = SQRT_FUN(a[e][k][k] + 2.0f * n);
      for (int i = k + 1; i < n; i++)
        a[e][i][k] = a[e][i][k] / a[e][k][k];
      for (int i = k + 1; i < n; i++)
        for (int j = k + 1; j <= i; j++)
          a[e][i][j] -= a[e][i][k] * a[e][j][k];
    }
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
