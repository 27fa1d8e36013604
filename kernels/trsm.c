/* trsm: in-place triangular solve with many right-hand sides, B := alpha L^-1 B, L lower
   triangular (m x m) with the diagonal a[i][i] + m (shifted so that random inputs give a
   well-conditioned system: plain substitution on entries in [0.5, 1.5) grows like 2^m and
   loses float accuracy), B m x n.  Row i needs every earlier row finished: the i loop
   carries flow dependences, the columns j are independent, and the k trip count grows
   with i.  The scaling by alpha comes first, as BLAS defines it.  -D DATA_TYPE=double
   for double. */
#ifndef DATA_TYPE
#define DATA_TYPE float
#endif

void trsm(int m, int n, DATA_TYPE alpha, DATA_TYPE a[m][m], DATA_TYPE b[m][n])
{
#pragma scop
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      b[i][j] = alpha * b[i][j];
      for (int k = 0; k < i; k++)
        b[i][j] -= a[i][k] * b[k][j];
      b[i][j] = b[i][j] / (a[i][i] + m);
    }
#pragma endscop
}
