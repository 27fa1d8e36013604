// expect: do-while loop
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    do { // <- error
      a[i] = 0;
    } while (0);
#pragma endscop
}
