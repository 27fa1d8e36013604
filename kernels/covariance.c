/* covariance: the m x m sample covariance of data (n observations of m variables):
   column means, centring in place, then cov[i][j] = sum_k data[k][i] data[k][j] / (n - 1)
   on the upper triangle, mirrored to the lower one.  Column reductions, an elementwise
   pass and a triangular syrk-like product with a mirrored store. */
void covariance(int n, int m, float data[n][m], float mean[m], float cov[m][m])
{
#pragma scop
  for (int j = 0; j < m; j++) {
    mean[j] = 0.0f;
    for (int i = 0; i < n; i++)
      mean[j] += data[i][j];
    mean[j] = mean[j] / n;
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      data[i][j] -= mean[j];
  for (int i = 0; i < m; i++)
    for (int j = i; j < m; j++) {
      cov[i][j] = 0.0f;
      for (int k = 0; k < n; k++)
        cov[i][j] += data[k][i] * data[k][j];
      cov[i][j] = cov[i][j] / (n - 1);
      cov[j][i] = cov[i][j];
    }
#pragma endscop
}
