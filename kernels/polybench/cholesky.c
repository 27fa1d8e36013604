/* PolyBench/C 4.2.1 cholesky, as written there: by rows, in place. */
#include <math.h>
void cholesky(int n, double A[n][n])
{
#pragma scop
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < i; j++) {
      for (int k = 0; k < j; k++)
        A[i][j] -= A[i][k] * A[j][k];
      A[i][j] /= A[j][j];
    }
    for (int k = 0; k < i; k++)
      A[i][i] -= A[i][k] * A[i][k];
    A[i][i] = sqrt(A[i][i]);
  }
#pragma endscop
}
