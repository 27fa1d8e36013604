/* lu: in-place LU factorisation without pivoting, right-looking (kij) form, of the
   matrix A + 2n I.  The first nest adds the 2n shift to the diagonal, which makes any
   matrix with entries in [0.5, 1.5) (random check inputs) strictly diagonally dominant,
   so no pivoting is needed and float32 stays accurate; without it random inputs give
   tiny pivots.  Afterwards a holds L (strictly lower, unit diagonal implicit) and U.
   The pivot loop k is sequential (to be driven from the host); for each k the column
   scaling and the trailing rank-1 update are parallel over a shrinking
   (n-k-1)^2 square. */
void lu(int n, float a[n][n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i][i] += 2.0f * n;
  for (int k = 0; k < n; k++) {
    for (int i = k + 1; i < n; i++)
      a[i][k] = a[i][k] / a[k][k];
    for (int i = k + 1; i < n; i++)
      for (int j = k + 1; j < n; j++)
        a[i][j] -= a[i][k] * a[k][j];
  }
#pragma endscop
}
