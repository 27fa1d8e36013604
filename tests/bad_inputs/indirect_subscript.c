// expect: a[b[i]]: indirect subscript: subscripts must be affine in loop iterators and integer parameters
void f(int n, float a[n], int b[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[b[i]] = 0; // <- error
#pragma endscop
}
