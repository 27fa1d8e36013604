// expect: break: loops must run over their whole iteration domain
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++) {
    a[i] = 0;
    if (i == 5)
      break; // <- error
  }
#pragma endscop
}
