/* gemver: the BLAS-2 sequence A += u1 v1^T + u2 v2^T; x += beta A^T y; x += z;
   w += alpha A x.  Four nests with producer/consumer dependences through A and x: the
   rank-2 update is elementwise, the two matrix-vector products read the updated A in
   transposed and natural order, so fusion and layout choices interact. */
void gemver(int n, float alpha, float beta, float a[n][n],
            float u1[n], float v1[n], float u2[n], float v2[n],
            float w[n], float x[n], float y[n], float z[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      a[i][j] += u1[i] * v1[j] + u2[i] * v2[j];
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      x[i] += beta * a[j][i] * y[j];
  for (int i = 0; i < n; i++)
    x[i] += z[i];
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      w[i] += alpha * a[i][j] * x[j];
#pragma endscop
}
