// expect: reads outside array 'a' (extent [10]): at n = 11, i = 10
// command: check -p n=11
void f(int n, float a[10], float b[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    b[i] = a[i];  // <- error
#pragma endscop
}
