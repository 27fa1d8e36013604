/* mm3 (3mm): G = (A B) (C D) as E = A B (ni x nj), F = C D (nj x nl), G = E F
   (ni x nl), with A ni x nk, B nk x nj, C nj x nm, D nm x nl.  E and F are
   independent gemms; G depends on both. */
void mm3(int ni, int nj, int nk, int nl, int nm,
         float e[ni][nj], float a[ni][nk], float b[nk][nj],
         float f[nj][nl], float c[nj][nm], float d[nm][nl], float g[ni][nl])
{
#pragma scop
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++) {
      e[i][j] = 0.0f;
      for (int k = 0; k < nk; k++)
        e[i][j] += a[i][k] * b[k][j];
    }
  for (int i = 0; i < nj; i++)
    for (int j = 0; j < nl; j++) {
      f[i][j] = 0.0f;
      for (int k = 0; k < nm; k++)
        f[i][j] += c[i][k] * d[k][j];
    }
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nl; j++) {
      g[i][j] = 0.0f;
      for (int k = 0; k < nj; k++)
        g[i][j] += e[i][k] * f[k][j];
    }
#pragma endscop
}
