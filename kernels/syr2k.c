/* syr2k: symmetric rank-2k update C = alpha (A B^T + B A^T) + beta C on the lower
   triangle of C (A, B n x m).  Like syrk over a triangular space, with four operand
   rows per step instead of two: more reuse per loaded element. */
void syr2k(int n, int m, float alpha, float beta, float c[n][n], float a[n][m],
           float b[n][m])
{
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j <= i; j++) {
      c[i][j] *= beta;
      for (int k = 0; k < m; k++)
        c[i][j] += alpha * (a[i][k] * b[j][k] + b[i][k] * a[j][k]);
    }
#pragma endscop
}
