// expect: static/extern local 'count'
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++) {
    static float count; // <- error
    a[i] = 0;
  }
#pragma endscop
}
