/* conv2d: a 2-D convolution (correlation form) with a 5 x 5 filter, valid region only:
   b[i][j] = sum_{p,q} w[p][q] a[i + p][j + q].  The weights are small, compile-time
   sized and read by all threads at one address (__constant__); the image tile plus a
   4-point halo goes through shared memory; the 25-term sum stays in a register. */
void conv2d(int n, int m, float w[5][5], float a[n + 4][m + 4], float b[n][m])
{
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) {
      b[i][j] = 0.0f;
      for (int p = 0; p < 5; p++)
        for (int q = 0; q < 5; q++)
          b[i][j] += w[p][q] * a[i + p][j + q];
    }
#pragma endscop
}
