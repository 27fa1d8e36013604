void nest(int n, double A[n], double B[n])
{
#pragma scop
  for (int t = 0; t < 3; t++)
    for (int i = n - 1; i > -1; i -= 2) {
      if (i == 0)
        B[0] = A[0] + 1.0;
      A[i] = B[0] + A[i];
    }
#pragma endscop
}
