/* gemm: general matrix multiply C = alpha A B + beta C with rectangular operands
   (A is ni x nk, B nk x nj).  The scaling statement and the k reduction write the
   same C element, so both fuse into one 2-D parallel nest with a serial k loop: the
   classic tiling / shared-memory / register-blocking target. */
void gemm(int ni, int nj, int nk, float alpha, float beta,
          float c[ni][nj], float a[ni][nk], float b[nk][nj])
{
#pragma scop
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++) {
      c[i][j] *= beta;
      for (int k = 0; k < nk; k++)
        c[i][j] += alpha * a[i][k] * b[k][j];
    }
#pragma endscop
}
