// expect: floating-point parameter 'alpha' in a subscript
void f(int n, float alpha, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = a[alpha]; // <- error
#pragma endscop
}
