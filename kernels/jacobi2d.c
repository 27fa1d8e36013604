/* jacobi2d: tsteps time steps of a 5-point Jacobi stencil, a -> b then b -> a.  The
   time loop is sequential (host-driven); each sweep is a 2-D parallel nest whose
   neighbouring points share inputs (shared-memory halo), and time tiling across the
   two statements is the big win. */
void jacobi2d(int tsteps, int n, float a[n][n], float b[n][n])
{
#pragma scop
  for (int t = 0; t < tsteps; t++) {
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        b[i][j] = 0.2f * (a[i][j] + a[i][j - 1] + a[i][j + 1] + a[i - 1][j] + a[i + 1][j]);
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        a[i][j] = 0.2f * (b[i][j] + b[i][j - 1] + b[i][j + 1] + b[i - 1][j] + b[i + 1][j]);
  }
#pragma endscop
}
