/* trsm_upper: in-place backward substitution with many right-hand sides, B := alpha U^-1 B,
   U upper triangular (m x m) with the diagonal a[i][i] + m (well-conditioned on random
   inputs, as in kernels/trsm.c), B m x n.  Row i needs every later row finished: the rows
   run downward from the last, and each row's sum runs k upward -- the recursion finishes
   the lower rows first, so it adds a row's terms in another order than written (its split
   says "sums re-associated"). */
void trsm_upper(int m, int n, float alpha, float a[m][m], float b[m][n])
{
#pragma scop
  for (int i = m - 1; i >= 0; i--)
    for (int j = 0; j < n; j++) {
      b[i][j] = alpha * b[i][j];
      for (int k = i + 1; k < m; k++)
        b[i][j] -= a[i][k] * b[k][j];
      b[i][j] = b[i][j] / (a[i][i] + m);
    }
#pragma endscop
}
