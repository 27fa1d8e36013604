/* mvt: x1 += A y1 and x2 += A^T y2 (Baskaran et al. 2008; PolyBench mvt). */
void mvt(int n, float a[n][n], float x1[n], float x2[n], float y1[n], float y2[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      x1[i] += a[i][j] * y1[j];
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      x2[i] += a[j][i] * y2[j];
#pragma endscop
}
