// expect: while loop
void f(int n, float a[n])
{
#pragma scop
  int i = 0;
  while (i < n) { // <- error
    a[i] = 0;
  }
#pragma endscop
}
