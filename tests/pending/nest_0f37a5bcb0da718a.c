#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))
void nest(int n, double A[2 * n + 3][2 * n + 3], double B[2 * n + 3][2 * n + 3], double x[2 * n + 3], double y[2 * n + 3])
{
#pragma scop
  for (int t = 0; t < 2; t += 1) {
    for (int i = n - 1; i > -1; i--) {
      for (int j = n - 3; j > 0; j--) {
        for (int k = max(i - 2, 2); k < min(i + 1, n); k += 1) {
          x[k + 2] = 0.5 * (x[k + 3] + x[k + 3]) + 1.0;
          x[j + 2] = 0.25 * (x[n - i - 1] + x[j] + x[j + 1]) + 1.0;
          x[2 * i] = 1.0;
        }
      }
    }
  }
#pragma endscop
}
