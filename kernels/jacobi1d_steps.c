/* jacobi1d_steps: tsteps time steps of the 3-point stencil of jacobi1d, a -> b then
   b -> a.  The 1-D time-tiling case: a sequential time loop over two statements whose
   dependences reach one point left and right per half-step. */
void jacobi1d_steps(int tsteps, int n, float a[n], float b[n])
{
#pragma scop
  for (int t = 0; t < tsteps; t++) {
    for (int i = 1; i < n - 1; i++)
      b[i] = 0.33333f * (a[i - 1] + a[i] + a[i + 1]);
    for (int i = 1; i < n - 1; i++)
      a[i] = 0.33333f * (b[i - 1] + b[i] + b[i + 1]);
  }
#pragma endscop
}
