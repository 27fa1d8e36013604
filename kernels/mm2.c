/* mm2 (2mm): D = alpha A B C + beta D, computed as tmp = alpha A B, then
   D = beta D + tmp C (A ni x nk, B nk x nj, C nj x nl, D ni x nl).  Two gemms chained
   through tmp: a global dependence between two tiled nests. */
void mm2(int ni, int nj, int nk, int nl, float alpha, float beta,
         float tmp[ni][nj], float a[ni][nk], float b[nk][nj], float c[nj][nl],
         float d[ni][nl])
{
#pragma scop
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++) {
      tmp[i][j] = 0.0f;
      for (int k = 0; k < nk; k++)
        tmp[i][j] += alpha * a[i][k] * b[k][j];
    }
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nl; j++) {
      d[i][j] *= beta;
      for (int k = 0; k < nj; k++)
        d[i][j] += tmp[i][k] * c[k][j];
    }
#pragma endscop
}
