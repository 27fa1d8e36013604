/* floyd_warshall: all-pairs shortest paths in place, path[i][j] = min(path[i][j],
   path[i][k] + path[k][j]) for each intermediate vertex k.  k is sequential
   (host-driven); for each k the n x n update is parallel (row k and column k are
   fixed points of step k, since path[k][k] >= 0) and reads one row and one column:
   a min-plus gemm-like update with a rank-1 operand. */
void floyd_warshall(int n, float path[n][n])
{
#pragma scop
  for (int k = 0; k < n; k++)
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        path[i][j] = fminf(path[i][j], path[i][k] + path[k][j]);
#pragma endscop
}
