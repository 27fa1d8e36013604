/* jacobi1d: one sweep of a 3-point stencil.  Neighbouring threads share two of their
   three inputs, so the block's inputs (its points and a halo of one on each side) are
   staged through shared memory. */
void jacobi1d(int n, float a[n], float b[n])
{
#pragma scop
  for (int i = 1; i < n - 1; i++)
    b[i] = 0.33333f * (a[i - 1] + a[i] + a[i + 1]);
#pragma endscop
}
