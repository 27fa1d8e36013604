/* floyd_warshall: all-pairs shortest paths, path[i][j] = min(path[i][j],
   path[i][k] + path[k][j]) for each intermediate vertex k, k sequential (host-driven).
   Written out of place: step k reads path and writes next, then copies back.  The
   textbook in-place form is parallel over (i, j) only because row k and column k are
   fixed points of step k when path[k][k] >= 0 -- a fact about the data that an exact
   dependence analysis cannot use, so in place every loop carries a dependence and the
   nest would run on one thread.  Out of place, each step is a min-plus rank-1 update
   over all (i, j) in parallel and a copy. */
void floyd_warshall(int n, float path[n][n], float next[n][n])
{
#pragma scop
  for (int k = 0; k < n; k++) {
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        next[i][j] = fminf(path[i][j], path[i][k] + path[k][j]);
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        path[i][j] = next[i][j];
  }
#pragma endscop
}
