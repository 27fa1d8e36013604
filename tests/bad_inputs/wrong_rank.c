// expect: array 'a' has 2 dimensions but 1 subscript
void f(int n, float a[n][n], float x[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    x[i] = a[i]; // <- error
#pragma endscop
}
