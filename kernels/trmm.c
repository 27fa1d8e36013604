/* trmm: in-place triangular matrix multiply B = alpha L^T B, L unit lower triangular
   (m x m; its strictly lower part is stored in a, the unit diagonal is implicit), B
   m x n.  Row i of the result reads only rows k > i of the old B, so ascending i works
   in place: the i loop carries anti-dependences (row k is read before it is
   overwritten) while the columns j are independent, and the k trip count shrinks
   with i (a triangular reduction). */
void trmm(int m, int n, float alpha, float a[m][m], float b[m][n])
{
#pragma scop
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      for (int k = i + 1; k < m; k++)
        b[i][j] += a[k][i] * b[k][j];
      b[i][j] = alpha * b[i][j];
    }
#pragma endscop
}
