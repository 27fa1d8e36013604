/* batched_gemv: many small independent matrix-vector products y[e] = a[e] x[e] (seed
   000's BLAS2 workload: nb elements of n x n, nb in the millions, elements one after
   another). */
#ifndef DATA_TYPE
#define DATA_TYPE float
#endif

void batched_gemv(int nb, int n, DATA_TYPE a[nb][n][n], DATA_TYPE x[nb][n],
                  DATA_TYPE y[nb][n])
{
#pragma scop
  for (int e = 0; e < nb; e++)
    for (int i = 0; i < n; i++) {
      y[e][i] = 0;
      for (int j = 0; j < n; j++)
        y[e][i] += a[e][i][j] * x[e][j];
    }
#pragma endscop
}
