/* PolyBench/C 4.2.1 gemm, as written there: C := alpha*A*B + beta*C, row i of C scaled
   by beta, then updated with the k loop outside the j loop. */
void gemm(int ni, int nj, int nk, double alpha, double beta, double C[ni][nj],
          double A[ni][nk], double B[nk][nj])
{
#pragma scop
  for (int i = 0; i < ni; i++) {
    for (int j = 0; j < nj; j++)
      C[i][j] *= beta;
    for (int k = 0; k < nk; k++) {
      for (int j = 0; j < nj; j++)
        C[i][j] += alpha * A[i][k] * B[k][j];
    }
  }
#pragma endscop
}
