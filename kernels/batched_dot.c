/* batched_dot: many small independent dot products r[e] = x[e] . y[e] (seed 000's
   reduction workload: nb vectors of n, nb in the millions, one after another). */
#ifndef DATA_TYPE
#define DATA_TYPE float
#endif

void batched_dot(int nb, int n, DATA_TYPE x[nb][n], DATA_TYPE y[nb][n], DATA_TYPE r[nb])
{
#pragma scop
  for (int e = 0; e < nb; e++) {
    r[e] = 0;
    for (int k = 0; k < n; k++)
      r[e] += x[e][k] * y[e][k];
  }
#pragma endscop
}
