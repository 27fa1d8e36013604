/* symm: C = alpha S B + beta C where S (m x m) is symmetric and only its lower
   triangle is stored in a: S[i][k] = a[i][k] for k <= i, a[k][i] for k > i.  The
   reduction splits into two k ranges reading a by rows and by columns, so each
   (i, j) element mixes two access patterns and a triangular trip count. */
void symm(int m, int n, float alpha, float beta, float c[m][n], float a[m][m],
          float b[m][n])
{
#pragma scop
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      c[i][j] *= beta;
      for (int k = 0; k <= i; k++)
        c[i][j] += alpha * a[i][k] * b[k][j];
      for (int k = i + 1; k < m; k++)
        c[i][j] += alpha * a[k][i] * b[k][j];
    }
#pragma endscop
}
