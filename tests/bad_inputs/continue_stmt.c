// expect: continue
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++) {
    if (i == 5)
      continue; // <- error
    a[i] = 0;
  }
#pragma endscop
}
