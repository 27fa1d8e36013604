/* bicg: the two products of a BiCG iteration, s = A^T r and q = A p, with A n x m.
   Independent of each other, they read the same A in transposed and natural order:
   one sweep over A could serve both, but each is parallel along a different dimension. */
void bicg(int n, int m, float a[n][m], float s[m], float q[n], float p[m], float r[n])
{
#pragma scop
  for (int j = 0; j < m; j++) {
    s[j] = 0.0f;
    for (int i = 0; i < n; i++)
      s[j] += r[i] * a[i][j];
  }
  for (int i = 0; i < n; i++) {
    q[i] = 0.0f;
    for (int j = 0; j < m; j++)
      q[i] += a[i][j] * p[j];
  }
#pragma endscop
}
