/* correlation: the m x m Pearson correlation matrix of data (n observations of m
   variables): column means and standard deviations (sqrtf; a deviation <= 0.1 is
   replaced by 1 with a data-dependent select, so near-constant columns do not divide
   by ~0), data standardised in place (divided by sqrt(n) stddev), then a triangular
   syrk-like product mirrored to the lower triangle with a unit diagonal. */
void correlation(int n, int m, float data[n][m], float mean[m], float stddev[m],
                 float corr[m][m])
{
#pragma scop
  for (int j = 0; j < m; j++) {
    mean[j] = 0.0f;
    for (int i = 0; i < n; i++)
      mean[j] += data[i][j];
    mean[j] = mean[j] / n;
  }
  for (int j = 0; j < m; j++) {
    stddev[j] = 0.0f;
    for (int i = 0; i < n; i++)
      stddev[j] += (data[i][j] - mean[j]) * (data[i][j] - mean[j]);
    stddev[j] = sqrtf(stddev[j] / n);
    stddev[j] = stddev[j] <= 0.1f ? 1.0f : stddev[j];
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      data[i][j] = (data[i][j] - mean[j]) / (sqrtf((float)n) * stddev[j]);
  for (int i = 0; i < m; i++) {
    corr[i][i] = 1.0f;
    for (int j = i + 1; j < m; j++) {
      corr[i][j] = 0.0f;
      for (int k = 0; k < n; k++)
        corr[i][j] += data[k][i] * data[k][j];
      corr[j][i] = corr[i][j];
    }
  }
#pragma endscop
}
