/* syrk: symmetric rank-k update C = alpha A A^T + beta C on the lower triangle of C
   (A is n x m).  A gemm-like reduction over a triangular (j <= i) iteration space:
   tiles along the diagonal are partial, and both operands are rows of the same A. */
void syrk(int n, int m, float alpha, float beta, float c[n][n], float a[n][m])
{
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j <= i; j++) {
      c[i][j] *= beta;
      for (int k = 0; k < m; k++)
        c[i][j] += alpha * a[i][k] * a[j][k];
    }
#pragma endscop
}
