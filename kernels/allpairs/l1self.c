/* All-pairs L1 distances within one point set (n x d), computed once per pair and
   mirrored: D[i][j] = D[j][i] = sum_k |x[i][k] - x[j][k]| for j <= i -- half the work of
   l1dist.c with m1 = m2 = x, over a triangle of (i, j). */
#ifndef DATA_TYPE
#define DATA_TYPE float
#define FABS fabsf
#endif

void l1self(int n, int d, DATA_TYPE x[n][d], DATA_TYPE D[n][n]) {
  DATA_TYPE s;
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j <= i; j++) {
      s = 0;
      for (int k = 0; k < d; k++)
        s += FABS(x[i][k] - x[j][k]);
      D[i][j] = s;
      D[j][i] = s;
    }
#pragma endscop
}
