/* cholesky: in-place right-looking Cholesky factorisation L L^T = S + 2n I, where S is
   the symmetric matrix whose lower triangle is stored in a (the upper triangle is
   neither read nor written).  The 2n shift, applied where the pivot's square root is
   taken, makes S + 2n I strictly diagonally dominant, hence positive definite, for any
   entries in [0.5, 1.5) (random check inputs); the stored result is exactly its
   Cholesky factor.  Sequential k (host-driven), then a column scaling and a triangular
   (k < j <= i) trailing update, both parallel. */
void cholesky(int n, float a[n][n])
{
#pragma scop
  for (int k = 0; k < n; k++) {
    a[k][k] = sqrtf(a[k][k] + 2.0f * n);
    for (int i = k + 1; i < n; i++)
      a[i][k] = a[i][k] / a[k][k];
    for (int i = k + 1; i < n; i++)
      for (int j = k + 1; j <= i; j++)
        a[i][j] -= a[i][k] * a[j][k];
  }
#pragma endscop
}
