// expect: struct member access
void f(int n, float a[n])
{
  struct { float x; } s;
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = s.x; // <- error
#pragma endscop
}
