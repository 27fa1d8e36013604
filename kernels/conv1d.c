/* conv1d: a 5-tap filter.  The taps are read-only, compile-time sized and read by all
   threads at one address: they go to __constant__ memory; the signal is staged through
   shared memory and each output accumulates in a register. */
void conv1d(int n, float w[5], float a[n + 4], float b[n])
{
#pragma scop
  for (int i = 0; i < n; i++) {
    b[i] = 0.0f;
    for (int k = 0; k < 5; k++)
      b[i] += w[k] * a[i + k];
  }
#pragma endscop
}
