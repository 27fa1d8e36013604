/* seidel2d: tsteps in-place Gauss-Seidel sweeps of a 9-point average.  Each point reads
   neighbours already updated in this sweep (i-1, j-1) and not yet updated (i+1, j+1):
   no loop is parallel as written; parallelism needs skewing (wavefronts) in (t, i, j). */
void seidel2d(int tsteps, int n, float a[n][n])
{
#pragma scop
  for (int t = 0; t < tsteps; t++)
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        a[i][j] = (a[i - 1][j - 1] + a[i - 1][j] + a[i - 1][j + 1]
                   + a[i][j - 1] + a[i][j] + a[i][j + 1]
                   + a[i + 1][j - 1] + a[i + 1][j] + a[i + 1][j + 1]) / 9.0f;
#pragma endscop
}
