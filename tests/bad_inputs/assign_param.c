// expect: assignment to parameter 'n'
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = 0;
  n = 0; // <- error
#pragma endscop
}
