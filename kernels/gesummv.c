/* gesummv: y = alpha A x + beta B x.  Two matrix-vector products over the same x that
   fuse into one row-parallel nest (x is read by every row: a shared/broadcast
   candidate); purely memory-bound, two matrices streamed once. */
void gesummv(int n, float alpha, float beta, float a[n][n], float b[n][n],
             float tmp[n], float x[n], float y[n])
{
#pragma scop
  for (int i = 0; i < n; i++) {
    tmp[i] = 0.0f;
    y[i] = 0.0f;
    for (int j = 0; j < n; j++) {
      tmp[i] += a[i][j] * x[j];
      y[i] += b[i][j] * x[j];
    }
    y[i] = alpha * tmp[i] + beta * y[i];
  }
#pragma endscop
}
