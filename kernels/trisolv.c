/* trisolv: forward substitution, solving (L + 2n I) x = b for x where L is the lower
   triangle of l (n x n).  The 2n diagonal shift makes the system strictly diagonally
   dominant for any entries in [0.5, 1.5) (random check inputs): plain forward
   substitution on such an L grows like c^n and loses float32 accuracy past n ~ 40.
   Each x[i] needs every earlier x[j]: a sequential wavefront with a parallel
   dot product per row. */
void trisolv(int n, float l[n][n], float x[n], float b[n])
{
#pragma scop
  for (int i = 0; i < n; i++) {
    x[i] = b[i];
    for (int j = 0; j < i; j++)
      x[i] -= l[i][j] * x[j];
    x[i] = x[i] / (l[i][i] + 2.0f * n);
  }
#pragma endscop
}
