/* batched_mm_soa: kernels/batched_mm.c with the elements interleaved (structure of
   arrays, seed 000's other layout): entry (i, j) of every element is one row
   a[i][j][*], element e's entries nb apart, consecutive elements' side by side. */
#ifndef DATA_TYPE
#define DATA_TYPE float
#endif

void batched_mm_soa(int nb, int n, DATA_TYPE a[n][n][nb], DATA_TYPE b[n][n][nb],
                    DATA_TYPE c[n][n][nb])
{
#pragma scop
  for (int e = 0; e < nb; e++)
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        c[i][j][e] = 0;
        for (int k = 0; k < n; k++)
          c[i][j][e] += a[i][k][e] * b[k][j][e];
      }
#pragma endscop
}
