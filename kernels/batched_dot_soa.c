/* batched_dot_soa: kernels/batched_dot.c with the elements interleaved (structure of
   arrays): entry k of every element's vectors is one row x[k][*], y[k][*]. */
#ifndef DATA_TYPE
#define DATA_TYPE float
#endif

void batched_dot_soa(int nb, int n, DATA_TYPE x[n][nb], DATA_TYPE y[n][nb], DATA_TYPE r[nb])
{
#pragma scop
  for (int e = 0; e < nb; e++) {
    r[e] = 0;
    for (int k = 0; k < n; k++)
      r[e] += x[k][e] * y[k][e];
  }
#pragma endscop
}
