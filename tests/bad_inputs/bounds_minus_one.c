// expect: a[i - 1] reads outside array 'a'
// command: check -p n=7
void f(int n, float a[n], float b[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    b[i] = a[i - 1] + a[i];  // <- error
#pragma endscop
}
