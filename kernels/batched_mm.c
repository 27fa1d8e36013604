/* batched_mm: many small independent products c[e] = a[e] b[e] (seed 000's batched
   workload: nb elements of n x n, nb in the millions). */
void batched_mm(int nb, int n, float a[nb][n][n], float b[nb][n][n], float c[nb][n][n])
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
