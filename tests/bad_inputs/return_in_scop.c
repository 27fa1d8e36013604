// expect: return inside #pragma scop
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = 0;
  return; // <- error
#pragma endscop
}
