// expect: scalar variable 't' in a subscript
void f(int n, float a[n])
{
  int t;
#pragma scop
  for (int i = 0; i < n; i++) {
    t = i;
    a[t] = 0; // <- error
  }
#pragma endscop
}
