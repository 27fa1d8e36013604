/* PolyBench/C 4.2.1 trisolv, as written there: forward substitution L x = b. */
void trisolv(int n, double L[n][n], double x[n], double b[n])
{
#pragma scop
  for (int i = 0; i < n; i++) {
    x[i] = b[i];
    for (int j = 0; j < i; j++)
      x[i] -= L[i][j] * x[j];
    x[i] = x[i] / L[i][i];
  }
#pragma endscop
}
