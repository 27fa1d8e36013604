#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))
void nest(int n, double A[2 * n + 3][2 * n + 3], double B[2 * n + 3][2 * n + 3], double x[2 * n + 3], double y[2 * n + 3])
{
#pragma scop
  for (int i = 0; i < n; i += 3) {
    for (int j = 0; j < n - 2; j += 2) {
      for (int k = n - 3; k > 0; k -= 2) {
        B[n - i][j] = 0.5 * (y[i + 1] + B[2 * k][n - j + 1]) + 1.0;
        B[2][i + 1] += 0.5 * (B[2 * i + 1][k + 2] + B[1][2 * j]) + 1.0;
      }
      B[j + i][n - j - 1] = 0.5 * (B[j + i][n - j - 1]) + 1.0;
      A[1][1] += 0.5 * (A[i][i] + B[i + j + 2][j]) + 1.0;
    }
  }
#pragma endscop
}
