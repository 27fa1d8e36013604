/* batched_mm: many small independent products c[e] = a[e] b[e] (seed 000's batched
   workload: nb elements of n x n, nb in the millions). */
#ifndef DATA_TYPE
#define DATA_TYPE float
#endif

void batched_mm(int nb, int n, DATA_TYPE a[nb][n][n], DATA_TYPE b[nb][n][n],
                DATA_TYPE c[nb][n][n])
{
#pragma scop
  for (int e = 0; e < nb; e++)
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        c[e][i][j] = 0;
        for (int k = 0; k < n; k++)
          c[e][i][j] += a[e][i][k] * b[e][k][j];
      }
#pragma endscop
}
