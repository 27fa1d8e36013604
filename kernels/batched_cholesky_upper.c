/* batched_cholesky_upper: kernels/batched_cholesky.c in the other triangle (LAPACK's
   uplo = 'U', S = U^T U): for each element e, the upper Cholesky factor of S + 2n I
   overwrites the upper triangle of a[e] (row k divided by its pivot, then the trailing
   rows updated), then b[e] is overwritten by the solution of U^T U x = b[e]: a forward
   substitution with U^T and a backward one with U. */
#ifndef DATA_TYPE
#define DATA_TYPE float
#endif
#ifndef SQRT_FUN /* sqrt with DATA_TYPE=double (sqrtf rounds to float: PolyBench's macro) */
#define SQRT_FUN sqrtf
#endif

void batched_cholesky_upper(int nb, int n, DATA_TYPE a[nb][n][n], DATA_TYPE b[nb][n])
{
#pragma scop
  for (int e = 0; e < nb; e++) {
    for (int k = 0; k < n; k++) {
      a[e][k][k] = SQRT_FUN(a[e][k][k] + 2.0f * n);
      for (int j = k + 1; j < n; j++)
        a[e][k][j] = a[e][k][j] / a[e][k][k];
      for (int i = k + 1; i < n; i++)
        for (int j = i; j < n; j++)
          a[e][i][j] -= a[e][k][i] * a[e][k][j];
    }
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < i; j++)
        b[e][i] -= a[e][j][i] * b[e][j];
      b[e][i] = b[e][i] / a[e][i][i];
    }
    for (int i = n - 1; i >= 0; i--) {
      for (int j = i + 1; j < n; j++)
        b[e][i] -= a[e][i][j] * b[e][j];
      b[e][i] = b[e][i] / a[e][i][i];
    }
  }
#pragma endscop
}
