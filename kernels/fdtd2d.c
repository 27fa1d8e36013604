/* fdtd2d: tmax steps of a 2-D finite-difference time-domain (Yee) scheme: the boundary
   row of ey takes the source value fict[t], then ey and ex are updated from the
   differences of hz along i and j, then hz from the curl of (ex, ey).  Four statements
   per step with shifted, direction-dependent halos: a hard case for fusion and time
   tiling. */
void fdtd2d(int tmax, int nx, int ny, float ex[nx][ny], float ey[nx][ny],
            float hz[nx][ny], float fict[tmax])
{
#pragma scop
  for (int t = 0; t < tmax; t++) {
    for (int j = 0; j < ny; j++)
      ey[0][j] = fict[t];
    for (int i = 1; i < nx; i++)
      for (int j = 0; j < ny; j++)
        ey[i][j] -= 0.5f * (hz[i][j] - hz[i - 1][j]);
    for (int i = 0; i < nx; i++)
      for (int j = 1; j < ny; j++)
        ex[i][j] -= 0.5f * (hz[i][j] - hz[i][j - 1]);
    for (int i = 0; i < nx - 1; i++)
      for (int j = 0; j < ny - 1; j++)
        hz[i][j] -= 0.7f * (ex[i][j + 1] - ex[i][j] + ey[i + 1][j] - ey[i][j]);
  }
#pragma endscop
}
