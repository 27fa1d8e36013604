/* PolyBench/C 4.2.1 correlation, as written there: float_n (n as a double) is a scalar
   argument, eps = 0.1 is set before the region, a standard deviation <= eps is
   replaced by 1.0 with a data-dependent select, data is centred and reduced in place,
   and the last diagonal element is set after the loops. */
#include <math.h>
void correlation(int m, int n, double float_n, double data[n][m], double corr[m][m],
                 double mean[m], double stddev[m])
{
  double eps = 0.1;
#pragma scop
  for (int j = 0; j < m; j++) {
    mean[j] = 0.0;
    for (int i = 0; i < n; i++)
      mean[j] += data[i][j];
    mean[j] /= float_n;
  }
  for (int j = 0; j < m; j++) {
    stddev[j] = 0.0;
    for (int i = 0; i < n; i++)
      stddev[j] += (data[i][j] - mean[j]) * (data[i][j] - mean[j]);
    stddev[j] /= float_n;
    stddev[j] = sqrt(stddev[j]);
    stddev[j] = stddev[j] <= eps ? 1.0 : stddev[j];
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) {
      data[i][j] -= mean[j];
      data[i][j] /= sqrt(float_n) * stddev[j];
    }
  for (int i = 0; i < m - 1; i++) {
    corr[i][i] = 1.0;
    for (int j = i + 1; j < m; j++) {
      corr[i][j] = 0.0;
      for (int k = 0; k < n; k++)
        corr[i][j] += (data[k][i] * data[k][j]);
      corr[j][i] = corr[i][j];
    }
  }
  corr[m - 1][m - 1] = 1.0;
#pragma endscop
}
