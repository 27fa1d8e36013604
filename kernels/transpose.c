/* transpose: b = a^T for an n x m matrix.  No arithmetic: the whole point is that
   either the read or the write is strided unless the tile goes through shared memory
   (and padding avoids bank conflicts). */
void transpose(int n, int m, float a[n][m], float b[m][n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      b[j][i] = a[i][j];
#pragma endscop
}
