/* heat3d: tsteps explicit steps of the 3-D heat equation (7-point stencil,
   coefficient 0.125 per axis), a -> b then b -> a.  A 3-D parallel nest per half-step
   with a halo in every direction: shared-memory tiles in 3-D and, across steps, 3-D
   time tiling. */
void heat3d(int tsteps, int n, float a[n][n][n], float b[n][n][n])
{
#pragma scop
  for (int t = 0; t < tsteps; t++) {
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        for (int k = 1; k < n - 1; k++)
          b[i][j][k] = 0.125f * (a[i + 1][j][k] - 2.0f * a[i][j][k] + a[i - 1][j][k])
                     + 0.125f * (a[i][j + 1][k] - 2.0f * a[i][j][k] + a[i][j - 1][k])
                     + 0.125f * (a[i][j][k + 1] - 2.0f * a[i][j][k] + a[i][j][k - 1])
                     + a[i][j][k];
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        for (int k = 1; k < n - 1; k++)
          a[i][j][k] = 0.125f * (b[i + 1][j][k] - 2.0f * b[i][j][k] + b[i - 1][j][k])
                     + 0.125f * (b[i][j + 1][k] - 2.0f * b[i][j][k] + b[i][j - 1][k])
                     + 0.125f * (b[i][j][k + 1] - 2.0f * b[i][j][k] + b[i][j][k - 1])
                     + b[i][j][k];
  }
#pragma endscop
}
