/* batched_cholesky_soa: kernels/batched_cholesky.c with the elements interleaved
   (structure of arrays, seed 000's other layout): entry (i, j) of every element's
   matrix is one row a[i][j][*], so element e's entries lie nb apart and consecutive
   elements' entries side by side.  For each e: the Cholesky factor of S + 2n I in place
   of the lower triangle of a[.][.][e], then the solution of L L^T x = b[.][e] in place. */
#ifndef DATA_TYPE
#define DATA_TYPE float
#endif
#ifndef SQRT_FUN /* sqrt with DATA_TYPE=double (sqrtf rounds to float: PolyBench's macro) */
#define SQRT_FUN sqrtf
#endif

void batched_cholesky_soa(int nb, int n, DATA_TYPE a[n][n][nb], DATA_TYPE b[n][nb])
{
#pragma scop
  for (int e = 0; e < nb; e++) {
    for (int k = 0; k < n; k++) {
      a[k][k][e] = SQRT_FUN(a[k][k][e] + 2.0f * n);
      for (int i = k + 1; i < n; i++)
        a[i][k][e] = a[i][k][e] / a[k][k][e];
      for (int i = k + 1; i < n; i++)
        for (int j = k + 1; j <= i; j++)
          a[i][j][e] -= a[i][k][e] * a[j][k][e];
    }
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < i; j++)
        b[i][e] -= a[i][j][e] * b[j][e];
      b[i][e] = b[i][e] / a[i][i][e];
    }
    for (int i = n - 1; i >= 0; i--) {
      for (int j = i + 1; j < n; j++)
        b[i][e] -= a[j][i][e] * b[j][e];
      b[i][e] = b[i][e] / a[i][i][e];
    }
  }
#pragma endscop
}
