/* durbin: Levinson-Durbin recursion solving the Yule-Walker system T y = -r, where T is
   the symmetric Toeplitz matrix with diagonal 2n and off-diagonals
   T[i][j] = r[|i - j| - 1].  (With the usual unit diagonal, random r in [0.5, 1.5)
   would not be an autocorrelation and beta would cross zero; the 2n diagonal keeps T
   diagonally dominant, |alpha| < 1 and beta > 0.)  alpha, beta and sum are scalar
   temporaries rewritten at every k, so k is sequential; each step has a dot product
   (reduction) and a reversed-order vector update through the buffer z. */
void durbin(int n, float r[n], float y[n], float z[n])
{
  float alpha, beta, sum;
#pragma scop
  beta = 2.0f * n;
  alpha = -r[0] / beta;
  y[0] = alpha;
  for (int k = 1; k < n; k++) {
    beta = (1.0f - alpha * alpha) * beta;
    sum = 0.0f;
    for (int i = 0; i < k; i++)
      sum += r[k - i - 1] * y[i];
    alpha = -(r[k] + sum) / beta;
    for (int i = 0; i < k; i++)
      z[i] = y[i] + alpha * y[k - i - 1];
    for (int i = 0; i < k; i++)
      y[i] = z[i];
    y[k] = alpha;
  }
#pragma endscop
}
