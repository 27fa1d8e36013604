/* batched_gemv_soa: kernels/batched_gemv.c with the elements interleaved (structure of
   arrays): entry (i, j) of every element's matrix is one row a[i][j][*], entry i of
   every element's vector one row x[i][*]. */
#ifndef DATA_TYPE
#define DATA_TYPE float
#endif

void batched_gemv_soa(int nb, int n, DATA_TYPE a[n][n][nb], DATA_TYPE x[n][nb],
                      DATA_TYPE y[n][nb])
{
#pragma scop
  for (int e = 0; e < nb; e++)
    for (int i = 0; i < n; i++) {
      y[i][e] = 0;
      for (int j = 0; j < n; j++)
        y[i][e] += a[i][j][e] * x[j][e];
    }
#pragma endscop
}
