// expect: floating-point constant 1.5 in a subscript
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = a[i + 1.5]; // <- error
#pragma endscop
}
