/* PolyBench/C 4.2.1 floyd-warshall, as written there: in place, one array. */
void floyd_warshall(int n, int path[n][n])
{
#pragma scop
  for (int k = 0; k < n; k++)
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        path[i][j] = path[i][j] < path[i][k] + path[k][j] ?
                     path[i][j] : path[i][k] + path[k][j];
#pragma endscop
}
