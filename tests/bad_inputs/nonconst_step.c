// expect: non-constant loop step
void f(int n, int k, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i += k) // <- error
    a[i] = 0;
#pragma endscop
}
